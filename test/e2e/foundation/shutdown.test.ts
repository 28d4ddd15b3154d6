/**
 * Every long-running command exits within its bound after SIGTERM, whatever its stdout does: a reader
 * that stops reading (pipe full), a reader that goes away (EPIPE), during an open intern stream and
 * during a paused run. The bound is PORTICO_SHUTDOWN_TIMEOUT_MS + the watchdog's 2 s; the assertions
 * allow a further margin for a loaded machine. Tests wait for the `exit` event, never sleep.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { serveWithBanner } from "../../helpers/cli.js";
import { WATCHDOG_EXTRA_MS } from "../../../src/cli/shutdown.js";

const GRACE_MS = 3_000;
/** The documented bound plus room for a loaded 2-core machine to schedule the exit. */
const LIMIT_MS = GRACE_MS + WATCHDOG_EXTRA_MS + 4_000;

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Served {
  child: ChildProcess;
  base: string;
  key: string;
  intern: string;
  dataDir: string;
}

/** `portico serve` on a fresh folder, its stdout and stderr read through pipes by this process. */
async function serve(extraEnv: Record<string, string> = {}): Promise<Served> {
  const dataDir = mkdtempSync(join(tmpdir(), "portico-stop-"));
  dirs.push(dataDir);
  const s = await serveWithBanner({ PORTICO_DATA_DIR: dataDir, PORTICO_SHUTDOWN_TIMEOUT_MS: String(GRACE_MS), ...extraEnv });
  return { child: s.child, base: s.base, key: s.managementKey, intern: s.internId, dataDir };
}

/** Sends SIGTERM and resolves with the exit and the time it took. */
function stop(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  const t0 = Date.now();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal, ms: Date.now() - t0 })),
  );
  child.kill("SIGTERM");
  return exited;
}

async function traffic(s: Served, n: number): Promise<void> {
  const auth = { authorization: `Bearer ${s.key}`, "content-type": "application/json" };
  for (let i = 0; i < n; i += 20) {
    await Promise.all(
      Array.from({ length: 20 }, (_, j) =>
        fetch(`${s.base}/presets/stop-test-${(i + j) % 7}/chat/completions`, {
          method: "POST",
          headers: auth,
          body: JSON.stringify({ model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] }),
        }).then((r) => r.arrayBuffer()),
      ),
    );
  }
}

/** Processes whose working folder lies under `dir` (agents and their commands). */
function processesUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/cwd`).startsWith(dir)) pids.push(Number(entry));
    } catch {
      // gone or not ours to read
    }
  }
  return pids;
}

/** The command line of a process ("" once it is gone). */
function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
  } catch {
    return "";
  }
}

/** Sends an intern prompt (serve is ready, so whichever worker takes it reaches the embedded host). */
function chat(s: Served, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${s.base}/interns/${s.intern}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

/** Reads an SSE response until `until(text)` holds; returns the text so far (the stream stays open). */
async function readUntil(res: Response, until: (text: string) => boolean): Promise<string> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = "";
  while (!until(text)) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
  }
  return text;
}

describe("shutdown ends within its bound", () => {
  it("when the stdout reader has stopped reading (pipe full); the server keeps answering meanwhile", async () => {
    const s = await serve({ PORTICO_LOG_LEVEL: "debug" });
    s.child.stdout!.pause();
    s.child.stderr!.pause();
    await traffic(s, 600);
    // Not frozen: it still answers while nobody reads its logs.
    expect((await fetch(s.base.replace(/\/api\/v1$/, "/healthz"))).status).toBe(200);
    const exit = await stop(s.child);
    expect(exit.ms).toBeLessThan(LIMIT_MS);
    expect(exit.signal).toBeNull();
  });

  it("when the stdout reader has gone away (EPIPE)", async () => {
    const s = await serve({ PORTICO_LOG_LEVEL: "debug" });
    await traffic(s, 100);
    s.child.stdout!.destroy();
    s.child.stderr!.destroy();
    await traffic(s, 200);
    const exit = await stop(s.child);
    expect(exit.ms).toBeLessThan(LIMIT_MS);
    expect(exit.signal).toBeNull();
  });

  it("during an open intern stream, taking the agent and its command along", async () => {
    const s = await serve();
    const res = await chat(s, { stream: true, messages: [{ role: "user", content: "$ sleep 600" }] });
    expect(res.status).toBe(200);
    await readUntil(res, (t) => t.includes("sleep"));
    expect(processesUnder(s.dataDir).length).toBeGreaterThan(0);
    const exit = await stop(s.child);
    expect(exit.ms).toBeLessThan(LIMIT_MS);
    await expect.poll(() => processesUnder(s.dataDir), { timeout: 5_000 }).toEqual([]);
  });

  it("during a paused run", async () => {
    const s = await serve();
    const res = await chat(s, { stream: true, approval_mode: "manual", messages: [{ role: "user", content: "$ echo paused" }] });
    expect(res.status).toBe(200);
    const text = await readUntil(res, (t) => t.includes("provide_input") && t.includes("[DONE]"));
    expect(text).toContain("provide_input");
    const exit = await stop(s.child);
    expect(exit.ms).toBeLessThan(LIMIT_MS);
    expect(exit.signal).toBeNull();
    await expect.poll(() => processesUnder(s.dataDir), { timeout: 5_000 }).toEqual([]);
  });

  it("when the serve primary is SIGKILLed, its workers take the agent's command along", async () => {
    // Two workers: a primary that serves nothing, worker 0 holding the embedded host.
    const s = await serve({ PORTICO_WORKERS: "2" });
    const res = await chat(s, { stream: true, messages: [{ role: "user", content: "$ sleep 600" }] });
    expect(res.status).toBe(200);
    await readUntil(res, (t) => t.includes("sleep"));
    // The command itself runs (the stream names it in the plan before the terminal starts).
    await expect.poll(() => processesUnder(s.dataDir).some((pid) => commandLine(pid) === "sleep 600"), { timeout: 10_000 }).toBe(true);
    const exited = new Promise((r) => s.child.once("exit", r));
    s.child.kill("SIGKILL");
    await exited;
    // No handler of the primary runs; the workers lose their IPC channel and exit, and whatever they
    // started goes with them, within the documented bound (2 s after the deadline) and a loaded machine's margin.
    await expect.poll(() => processesUnder(s.dataDir), { timeout: LIMIT_MS }).toEqual([]);
  });

  it("a second signal exits at once, naming what was pending on stderr", async () => {
    const s = await serve();
    let err = "";
    let out = "";
    s.child.stderr!.on("data", (d) => (err += d));
    s.child.stdout!.on("data", (d) => (out += d));
    // An open stream keeps the graceful stop busy.
    const res = await chat(s, { stream: true, messages: [{ role: "user", content: "$ sleep 600" }] });
    await readUntil(res, (t) => t.includes("sleep"));
    const stderrClosed = new Promise((r) => s.child.stderr!.once("close", r));
    const exited = new Promise<{ code: number | null; ms: number }>((resolve) => {
      const t0 = Date.now();
      s.child.once("exit", (code) => resolve({ code, ms: Date.now() - t0 }));
    });
    s.child.kill("SIGTERM");
    await expect.poll(() => out.includes("shutting down"), { timeout: 10_000, interval: 5 }).toBe(true);
    s.child.kill("SIGTERM");
    const exit = await exited;
    expect(exit.code).toBe(1);
    expect(exit.ms).toBeLessThan(LIMIT_MS);
    await stderrClosed;
    expect(err).toContain("exiting before the graceful stop finished");
    // The primary passes the second signal on to its workers, which kill their agent groups as they exit; a
    // worker whose event loop is busy (a loaded machine) is still bound by its own deadline and watchdog
    // (grace + 2 s after its first signal).
    await expect.poll(() => processesUnder(s.dataDir), { timeout: GRACE_MS + 5_000 }).toEqual([]);
  });
});
