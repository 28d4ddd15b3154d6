import { execFile } from "node:child_process";
import { join, resolve } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogSink } from "../../../src/lib/log-sink.js";

/** A stream whose reader has stalled: nothing it accepts is ever written. */
function stalledStream(): Writable {
  return new Writable({ highWaterMark: 1024, write: () => undefined });
}

describe("log sink", () => {
  it("bounds what waits for a stalled reader and counts the lines it drops", () => {
    const stream = stalledStream();
    const sink = createLogSink(stream, 64 * 1024);
    const line = JSON.stringify({ msg: "x".repeat(200) }) + "\n";
    for (let i = 0; i < 10_000; i++) sink.write(line);
    expect(stream.writableLength).toBeLessThanOrEqual(64 * 1024 + line.length);
    expect(sink.dropped).toBeGreaterThan(9_000);
    expect(sink.pendingBytes).toBe(stream.writableLength);
  });

  it("drops everything after the stream fails (reader gone) without throwing", async () => {
    const stream = new Writable({
      write: (_chunk, _enc, cb) => cb(Object.assign(new Error("write EPIPE"), { code: "EPIPE" })),
    });
    const sink = createLogSink(stream);
    sink.write("first\n");
    await new Promise((r) => stream.once("error", r));
    expect(() => sink.write("second\n")).not.toThrow();
    expect(sink.dropped).toBeGreaterThanOrEqual(1);
    await expect(sink.drain(10_000)).resolves.toBeUndefined();
  });

  it("reports dropped lines once the reader catches up", async () => {
    const seen: string[] = [];
    let release: (() => void) | undefined;
    const stream = new Writable({
      highWaterMark: 16,
      write: (chunk, _enc, cb) => {
        seen.push(String(chunk));
        if (!release) release = cb;
        else cb();
      },
    });
    const sink = createLogSink(stream, 32);
    for (let i = 0; i < 20; i++) sink.write(`line-${i}-${"y".repeat(20)}\n`);
    expect(sink.dropped).toBeGreaterThan(0);
    // The lines of this turn reach the stream at the end of the turn.
    await new Promise((r) => setImmediate(r));
    const drained = new Promise((r) => stream.once("drain", r));
    release!();
    await drained;
    await new Promise((r) => setImmediate(r));
    const report = seen.map((s) => s.trim()).find((s) => s.includes("lines were dropped"));
    expect(report).toBeDefined();
    expect(JSON.parse(report!).dropped).toBe(sink.dropped);
  });

  it("hands the lines of one turn to the stream in one write, in order, and drain() writes a batch at once", async () => {
    const writes: string[] = [];
    const stream = new Writable({
      write: (chunk, _enc, cb) => {
        writes.push(String(chunk));
        cb();
      },
    });
    const sink = createLogSink(stream);
    sink.write("a\n");
    sink.write("b\n");
    sink.write("c\n");
    expect(writes).toEqual([]);
    expect(sink.pendingBytes).toBe(6);
    await new Promise((r) => setImmediate(r));
    expect(writes).toEqual(["a\nb\nc\n"]);
    sink.write("d\n");
    await sink.drain(1_000);
    expect(writes).toEqual(["a\nb\nc\n", "d\n"]);
    expect(sink.pendingBytes).toBe(0);
  });

  it("writes the lines still waiting for the end of the turn when the process exits", async () => {
    const root = resolve(import.meta.dirname, "../../..");
    for (const mode of ["ok", "fail"]) {
      const { stdout, code } = await new Promise<{ stdout: string; code: number | null }>((done) => {
        const child = execFile(process.execPath, [join(root, "bin/run-ts.mjs"), join(root, "test/fixtures/log-sink-exit.ts"), mode], (err, out) =>
          done({ stdout: out, code: err ? ((err as { code?: number }).code ?? null) : 0 }),
        );
        child.stdin?.end();
      });
      expect(code).toBe(mode === "ok" ? 0 : 3);
      expect(stdout).toBe("first line\nlast line before exit\n");
    }
  });
});
