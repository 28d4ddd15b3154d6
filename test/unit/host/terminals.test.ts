/** Client terminals: shell vs exec, output tail, limits, kill and release. */
import { beforeAll, describe, expect, it } from "vitest";
import { loadAcp } from "../../../src/host/acp-runtime.js";
import { createTerminalManager } from "../../../src/host/terminals.js";

const launch = { cwd: "/", env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, writable: [] };


// The host loads the ACP SDK when it starts its first agent; these modules run after that.
beforeAll(async () => {
  await loadAcp();
});
describe("terminal manager", () => {
  it("runs a shell line through /bin/sh -c and argv commands directly", async () => {
    const t = createTerminalManager({ maxOpen: 4, maxOutputBytes: 1000 });
    const a = t.create({ command: "echo $((1+2)) && echo err >&2" }, launch);
    expect(await t.waitForExit(a.terminalId)).toEqual({ exitCode: 0, signal: null });
    expect(t.output(a.terminalId).output).toBe("3\nerr\n");
    const b = t.create({ command: "echo", args: ["$HOME", "a b"] }, launch);
    await t.waitForExit(b.terminalId);
    expect(t.output(b.terminalId)).toMatchObject({ output: "$HOME a b\n", truncated: false, exitStatus: { exitCode: 0 } });
    t.disposeAll();
  });

  it("keeps the output tail within the byte limit at a character boundary", async () => {
    const t = createTerminalManager({ maxOpen: 4, maxOutputBytes: 1000 });
    const a = t.create({ command: "printf 'xxéé€'", outputByteLimit: 6 }, launch);
    await t.waitForExit(a.terminalId);
    expect(t.output(a.terminalId)).toMatchObject({ output: "é€", truncated: true });
    const big = t.create({ command: "yes 0123456789 | head -c 200000; printf END" }, launch);
    await t.waitForExit(big.terminalId);
    const out = t.output(big.terminalId);
    expect(out.truncated).toBe(true);
    expect(Buffer.byteLength(out.output)).toBeLessThanOrEqual(1000);
    expect(out.output.endsWith("END")).toBe(true);
    t.disposeAll();
  });

  it("limits open terminals, kills and releases", async () => {
    const t = createTerminalManager({ maxOpen: 1, maxOutputBytes: 1000 });
    const a = t.create({ command: "sleep 30" }, launch);
    expect(() => t.create({ command: "true" }, launch)).toThrow(/at most 1 open terminals/);
    t.kill(a.terminalId);
    expect(await t.waitForExit(a.terminalId)).toEqual({ exitCode: null, signal: "SIGKILL" });
    expect(t.output(a.terminalId).exitStatus?.signal).toBe("SIGKILL");
    t.release(a.terminalId);
    expect(() => t.output(a.terminalId)).toThrow(/unknown terminal/);
    expect(t.open).toBe(0);
    t.create({ command: "true" }, launch);
    t.disposeAll();
  });
});
