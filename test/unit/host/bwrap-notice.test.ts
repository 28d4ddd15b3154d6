/**
 * What the intern host logs at start-up when bubblewrap is missing: what it affects for the agent it drives,
 * not an alarm. The built-in agent asks before every command, so for it the line is informational; a
 * profile whose agent runs in a process sandbox cannot start, which is a warning.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { builtinAgentProfile } from "../../../src/host/embedded.js";
import { createInternHost } from "../../../src/host/link.js";
import { bwrapMissingNotice } from "../../../src/host/sandbox.js";

describe("the missing-bubblewrap notice", () => {
  it("says what it affects, at info level for the built-in agent's terminal sandbox", () => {
    const notice = bwrapMissingNotice(builtinAgentProfile())!;
    expect(notice.level).toBe("info");
    expect(notice.message).toContain("without asking first is refused");
    expect(notice.message).toContain("built-in agent");
    expect(notice.message).toContain("not affected");
  });

  it("warns for a process sandbox, and says nothing when no sandbox or no terminal is in play", () => {
    expect(bwrapMissingNotice({ sandbox: "process" })).toMatchObject({ level: "warn", message: expect.stringContaining("cannot start") });
    expect(bwrapMissingNotice({ sandbox: "none" })).toBeNull();
    expect(bwrapMissingNotice({ sandbox: "terminal", offerTerminal: false })).toBeNull();
  });

  it("is what a host without bwrap logs (no warning for the built-in agent)", async () => {
    const lines: Array<{ level: number; msg: string }> = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(JSON.parse(String(chunk)));
        cb();
      },
    });
    const workRoot = mkdtempSync(join(tmpdir(), "portico-bwrap-notice-"));
    const host = createInternHost({
      workRoot,
      coreUrl: "http://127.0.0.1:9",
      token: `pht-v1-${"0".repeat(64)}`,
      profile: builtinAgentProfile(),
      bwrapPath: null,
      logger: pino({ level: "info" }, sink),
    });
    await host.close();
    rmSync(workRoot, { recursive: true, force: true });
    const about = lines.filter((l) => l.msg.includes("bubblewrap"));
    expect(about).toHaveLength(1);
    expect(about[0]!.level).toBe(30); // info, not warn (40)
    expect(about[0]!.msg).toContain("built-in agent");
  });
});
