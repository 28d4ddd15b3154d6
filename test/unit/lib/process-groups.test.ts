/**
 * Tracked process groups end with the process that tracks them, however it ends: SIGKILL (no handler
 * runs), process.exit from anywhere, an uncaught exception. Each case runs a real process holding a real
 * `sleep 600` group and waits (bounded) for that group to be gone.
 */
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const REPO_ROOT = resolve(fileURLToPath(new URL("../../..", import.meta.url)));
const started: number[] = [];

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Starts the holder; resolves with its process and the group id it tracks. */
async function holder(how: "wait" | "exit" | "throw") {
  const child = spawn(process.execPath, [`${REPO_ROOT}/bin/run-ts.mjs`, `${REPO_ROOT}/test/fixtures/group-holder.ts`, how], { stdio: ["ignore", "pipe", "ignore"] });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const pgid = await new Promise<number>((resolveId, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d;
      const m = /^(\d+)\n/.exec(out);
      if (m) resolveId(Number(m[1]));
    });
    child.once("exit", (code) => reject(new Error(`holder exited ${code} before reporting its group`)));
  });
  started.push(pgid);
  return { child, pgid, exited };
}

afterEach(() => {
  for (const pgid of started.splice(0)) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // gone, as it should be
    }
  }
});

describe("tracked process groups end with their process", () => {
  it("when the process is SIGKILLed (no handler of it runs)", async () => {
    const h = await holder("wait");
    expect(groupAlive(h.pgid)).toBe(true);
    h.child.kill("SIGKILL");
    await h.exited;
    await expect.poll(() => groupAlive(h.pgid), { timeout: 5_000, interval: 20 }).toBe(false);
  });

  it("when the process calls process.exit", async () => {
    const h = await holder("exit");
    await h.exited;
    await expect.poll(() => groupAlive(h.pgid), { timeout: 5_000, interval: 20 }).toBe(false);
  });

  it("when the process dies of an uncaught exception", async () => {
    const h = await holder("throw");
    await h.exited;
    await expect.poll(() => groupAlive(h.pgid), { timeout: 5_000, interval: 20 }).toBe(false);
  });
});
