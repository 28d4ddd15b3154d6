/**
 * `portico serve`'s embedded host applies the PORTICO_HOST_* settings that docs/intern-host.md lists
 * (issue 25: it ignored them): one serve with a run-duration limit, a terminal output limit, a run-as
 * user (off: a root serve keeps root) and an explicit bwrap, each seen in what the built-in intern does.
 */
import type { ChildProcess } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPortico } from "../../helpers/cli.js";

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;

interface Served {
  base: string;
  apiKey: string;
  internId: string;
}

/** One prompt to the built-in intern; the SSE chunks, parsed. */
async function prompt(s: Served, text: string): Promise<{ status: number; chunks: any[] }> {
  const res = await fetch(`${s.base}/interns/${s.internId}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ stream: true, approval_mode: "self-drive", messages: [{ role: "user", content: text }] }),
  });
  const body = await res.text();
  const chunks = body
    .split("\n")
    .filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
    .map((l) => JSON.parse(l.slice(6)));
  return { status: res.status, chunks };
}

const contentOf = (chunks: any[]) => chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
const finishOf = (chunks: any[]) => chunks.find((c) => c.choices?.[0]?.finish_reason)?.choices[0];

describe("portico serve: the embedded host applies PORTICO_HOST_* settings", () => {
  let dir: string;
  let child: ChildProcess | undefined;
  let output: () => string;
  let served: Served;
  const bwrap = () => join(dir, "bin", "my-bwrap");

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "portico-serve-host-"));
    chmodSync(dir, 0o755);
    mkdirSync(join(dir, "bin"), { mode: 0o755 });
    writeFileSync(bwrap(), '#!/bin/sh\nexec bwrap "$@"\n', { mode: 0o755 });
    const p = await startPortico(
      ["serve"],
      {
        PORTICO_DATA_DIR: join(dir, "data"),
        PORT: "0",
        PORTICO_GRPC_PORT: "0",
        PORTICO_WORKERS: "1",
        PORTICO_LOG_LEVEL: "info",
        PORTICO_HOST_MAX_RUN_DURATION_MS: "4000",
        PORTICO_HOST_MAX_TERMINAL_OUTPUT_BYTES: "64",
        PORTICO_HOST_RUN_AS: "off",
        PORTICO_HOST_BWRAP: bwrap(),
        PORTICO_HOST_PROFILE: "/nonexistent/agent.json",
      },
      (out) => {
        const base = /API base URL:\s+(\S+)/.exec(out)?.[1];
        const apiKey = /api key:\s+(pk-v1-[0-9a-f]{64})/.exec(out)?.[1];
        const internId = /intern id:\s+([0-9a-f-]{36})/.exec(out)?.[1];
        return base && apiKey && internId && /"msg":"serving/.test(out) ? { base, apiKey, internId } : undefined;
      },
      120_000,
    );
    child = p.child;
    output = p.output;
    served = p.value;
  }, 180_000);

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once("exit", r));
      child.kill("SIGTERM");
      await gone;
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("keeps only the tail of a command's output (PORTICO_HOST_MAX_TERMINAL_OUTPUT_BYTES)", async () => {
    const r = await prompt(served, "$ seq 1 3000");
    expect(r.status).toBe(200);
    expect(contentOf(r.chunks)).toContain("…(output truncated)");
    expect(finishOf(r.chunks).finish_reason).toBe("stop");
  }, 60_000);

  it("ends a run past PORTICO_HOST_MAX_RUN_DURATION_MS", async () => {
    const started = Date.now();
    const r = await prompt(served, "$ sleep 60");
    expect(r.status).toBe(200);
    expect(finishOf(r.chunks).finish_reason).toBe("error");
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 60_000);

  it.skipIf(!isRoot)("runs the agent's commands as root with PORTICO_HOST_RUN_AS=off (default: uid 65534)", async () => {
    const r = await prompt(served, "$ id -u");
    expect(r.status).toBe(200);
    expect(contentOf(r.chunks)).toMatch(/\$ id -u\n0\n/);
  }, 60_000);

  it("uses the configured bwrap, and says which PORTICO_HOST_* variables it does not apply", () => {
    const lines = output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l));
    const sandbox = lines.find((l) => l.msg === "manual-mode commands are sandboxed with bubblewrap");
    expect(sandbox).toMatchObject({ bwrap: bwrap(), runAs: "self" });
    expect(lines.find((l) => /apply to `portico intern-host`, not to the embedded host/.test(l.msg))).toMatchObject({ variables: ["PORTICO_HOST_PROFILE"] });
  });
});
