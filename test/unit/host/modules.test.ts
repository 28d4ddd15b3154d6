/**
 * The engine's modules on their own: file-access confinement, sealed escalation, the bounded event
 * queue with round-robin draining, question order and answer judgement, and the agent environment.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, afterEach, describe, expect, it } from "vitest";
import { loadAcp } from "../../../src/host/acp-runtime.js";
import { agentEnvironment, agentFolders } from "../../../src/host/agent-env.js";
import { commandOfToolCall, EscalationLedger, terminalCommandLines } from "../../../src/host/escalation.js";
import { RunEventQueue, takeRoundRobin } from "../../../src/host/event-queue.js";
import { confinePath, readConfinedText, writeConfinedText } from "../../../src/host/file-access.js";
import { escalates, judgeAnswer, QuestionQueue, type PendingQuestion } from "../../../src/host/questions.js";
import { agentInstallDirsUnderTmp, bwrapAgentArgs } from "../../../src/host/sandbox.js";
import { stderrSummary } from "../../../src/host/agent-session.js";

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

function tempRoot(): string {
  const r = mkdtempSync(join(tmpdir(), "portico-mod-"));
  roots.push(r);
  return r;
}

function reasonOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return (err as { data?: { reason?: string } }).data?.reason ?? (err as Error).message;
  }
  return "no error";
}


// The host loads the ACP SDK when it starts its first agent; these modules run after that.
beforeAll(async () => {
  await loadAcp();
});
describe("file access confinement", () => {
  it("allows paths inside the folder and refuses escapes by .., symlink, dangling symlink or relative path", () => {
    const root = tempRoot();
    const cwd = join(root, "cwd");
    const outside = join(root, "outside");
    mkdirSync(cwd);
    mkdirSync(outside);
    writeFileSync(join(outside, "secret"), "s");
    symlinkSync(outside, join(cwd, "link-out"));
    symlinkSync(join(outside, "nothing-yet"), join(cwd, "dangling"));
    const c = { root: cwd, unconfined: false };
    expect(confinePath(c, join(cwd, "a", "new.txt"))).toBe(join(cwd, "a", "new.txt"));
    expect(confinePath(c, cwd)).toBe(cwd);
    expect(reasonOf(() => confinePath(c, join(cwd, "..", "outside", "secret")))).toBe("outside_working_folder");
    expect(reasonOf(() => confinePath(c, join(cwd, "link-out", "secret")))).toBe("outside_working_folder");
    expect(reasonOf(() => confinePath(c, join(cwd, "dangling")))).toBe("outside_working_folder");
    expect(reasonOf(() => confinePath(c, `${cwd}-sibling/x`))).toBe("outside_working_folder");
    expect(reasonOf(() => confinePath(c, "relative/x"))).toMatch(/path must be absolute/);
    // unconfined (self-drive as the host's own user): any absolute path, never a relative one
    expect(confinePath({ root: cwd, unconfined: true }, join(outside, "secret"))).toBe(join(outside, "secret"));
    expect(reasonOf(() => confinePath({ root: cwd, unconfined: true }, "x"))).toMatch(/path must be absolute/);
  });

  it("reads line windows and writes inside the folder only", () => {
    const cwd = tempRoot();
    const c = { root: cwd, unconfined: false };
    writeConfinedText(c, { sessionId: "s", path: join(cwd, "d", "f.txt"), content: "1\n2\n3\n4" }, undefined);
    expect(readConfinedText(c, { sessionId: "s", path: join(cwd, "d", "f.txt"), line: 2, limit: 2 }).content).toBe("2\n3");
    expect(() => writeConfinedText(c, { sessionId: "s", path: join(cwd, "..", "escaped.txt"), content: "x" }, undefined)).toThrow();
    expect(existsSync(join(cwd, "..", "escaped.txt"))).toBe(false);
    expect(readFileSync(join(cwd, "d", "f.txt"), "utf8")).toBe("1\n2\n3\n4");
  });
});

describe("sealed escalation", () => {
  const cwd = "/work/session";

  it("reads the command a tool call names", () => {
    expect(commandOfToolCall({ command: "  ls   -la " })).toBe("ls -la");
    expect(commandOfToolCall({ command: ["bash", "-lc", "make test"] })).toBe("bash -lc make test");
    expect(commandOfToolCall({ cmd: "pwd" })).toBe("pwd");
    expect(commandOfToolCall({ path: "/x" })).toBeUndefined();
    expect(commandOfToolCall(undefined)).toBeUndefined();
    expect(terminalCommandLines("sh", ["-c", "make  test"])).toEqual(["sh -c make test", "make test"]);
  });

  it("allow_once lets exactly the approved command run unsandboxed, once, in the session's folder", () => {
    const l = new EscalationLedger();
    expect(l.grant("call-1", { command: "npm test" }, false)).toBe(true);
    expect(l.consume({ command: "rm", args: ["-rf", "/"] }, cwd)).toBe(false);
    expect(l.consume({ command: "npm test", cwd: "/etc" }, cwd)).toBe(false);
    expect(l.consume({ command: "npm", args: ["test"], cwd: `${cwd}/sub` }, cwd)).toBe(true);
    // used up
    expect(l.consume({ command: "npm test" }, cwd)).toBe(false);
  });

  it("a shell wrapper of the approved command matches; a tool call without a command grants nothing", () => {
    const l = new EscalationLedger();
    expect(l.grant("call-1", { title: "whatever" }, false)).toBe(false);
    expect(l.consume({ command: "anything" }, cwd)).toBe(false);
    l.grant("call-2", { command: "make build" }, false);
    expect(l.consume({ command: "/bin/sh", args: ["-c", "make build"] }, cwd)).toBe(true);
  });

  it("allow_once ends with its tool call; allow_always repeats only its command until the run ends (clear)", () => {
    const once = new EscalationLedger();
    once.grant("call-0", { command: "make" }, false);
    once.toolCallEnded("call-0");
    expect(once.consume({ command: "make" }, cwd)).toBe(false);
    const l = new EscalationLedger();
    l.grant("call-1", { command: "pytest" }, true);
    expect(l.consume({ command: "pytest" }, cwd)).toBe(true);
    expect(l.consume({ command: "pytest" }, cwd)).toBe(true);
    expect(l.consume({ command: "pytest -x" }, cwd)).toBe(false);
    l.toolCallEnded("call-1");
    expect(l.consume({ command: "pytest" }, cwd)).toBe(true);
    l.grant("call-2", { command: "ls" }, true);
    l.clear();
    expect(l.consume({ command: "ls" }, cwd)).toBe(false);
    expect(l.size).toBe(0);
  });

  it("only allow answers to shell (or unknown) operations escalate", () => {
    expect(escalates({ operation: "shell" }, "allow_once")).toBe(true);
    expect(escalates({ operation: undefined }, "allow_always")).toBe(true);
    expect(escalates({ operation: "edit" }, "allow_once")).toBe(false);
    expect(escalates({ operation: "shell" }, "reject_once")).toBe(false);
  });
});

describe("run event queue", () => {
  it("numbers events, keeps within its byte budget (terminal events always fit) and closes after a terminal one", () => {
    const q = new RunEventQueue("r1", 200);
    expect(q.push({ case: "content", value: { text: "a".repeat(100) } })).toBe("queued");
    expect(q.push({ case: "content", value: { text: "b".repeat(100) } })).toBe("overflow");
    expect(q.push({ case: "turnFailed", value: { code: 410, reason: "attachment_failed", message: "x".repeat(300), retryable: false } })).toBe("queued");
    expect(q.push({ case: "content", value: { text: "late" } })).toBe("closed");
    expect(q.length).toBe(2);
    expect(q.shift()!.seq).toBe(1n);
    expect(q.shift()!.seq).toBe(2n);
    expect(q.lastTakenSeq).toBe(2n);
    expect(q.queuedBytes).toBe(0);
    expect(q.shift()).toBeUndefined();
  });

  it("drains several queues round-robin, skipping those the caller excludes", () => {
    const a = new RunEventQueue("a", 10_000);
    const b = new RunEventQueue("b", 10_000);
    const c = new RunEventQueue("c", 10_000);
    for (const q of [a, b, c]) for (let i = 0; i < 2; i++) q.push({ case: "content", value: { text: `${q.runId}${i}` } });
    const owners = [a, b, c];
    const order: string[] = [];
    let cursor = 0;
    for (;;) {
      const t = takeRoundRobin(owners, cursor, (o) => (o === b ? undefined : o));
      if (!t) break;
      cursor = t.cursor;
      order.push(t.event.runId);
    }
    expect(order).toEqual(["a", "c", "a", "c"]);
    expect(b.length).toBe(2);
  });
});

describe("questions", () => {
  function question(id: string, settled: string[]): PendingQuestion {
    return {
      id,
      toolCallId: `tc-${id}`,
      rawInput: undefined,
      options: [
        { optionId: "yes", kind: "allow_once" },
        { optionId: "no", kind: "reject_once" },
      ],
      kinds: ["allow_once", "reject_once"],
      operation: "shell",
      settle: (o) => settled.push(`${id}:${o.outcome}`),
    };
  }

  it("presents one at a time in order and cancels all of them at the end", () => {
    const settled: string[] = [];
    const qq = new QuestionQueue();
    const [q1, q2, q3] = [question("1", settled), question("2", settled), question("3", settled)];
    expect(qq.add(q1)).toBe(true);
    qq.presented = q1;
    expect(qq.add(q2)).toBe(false);
    expect(qq.add(q3)).toBe(false);
    expect(qq.remove(q2)).toBe(false);
    expect(qq.advance()).toBe(q3);
    qq.presented = q3;
    qq.cancelAll();
    expect(qq.presented).toBeUndefined();
    expect(settled).toEqual(["3:cancelled"]);
  });

  it("judges answers against the offered kinds", () => {
    const q = question("1", []);
    expect(judgeAnswer(q, "cancel")).toEqual({ kind: "cancel" });
    expect(judgeAnswer(q, "allow_always")).toEqual({ kind: "not_offered" });
    expect(judgeAnswer(q, "nonsense")).toEqual({ kind: "not_offered" });
    expect(judgeAnswer(q, "reject_once")).toEqual({ kind: "selected", option: "reject_once", optionId: "no" });
  });
});

describe("agent environment", () => {
  it("never passes Portico's settings or credentials; minimal keeps only the basics; the profile's env wins", () => {
    const source = { PATH: "/bin", PORTICO_HOST_TOKEN: "pht-secret", DATABASE_URL: "postgres://u:p@h/db", REDIS_URL: "redis://x", OPENAI_API_KEY: "sk", LC_ALL: "C" };
    const all = agentEnvironment({ command: "a" }, "/home/x", "/cwd", source);
    expect(all).toMatchObject({ PATH: "/bin", OPENAI_API_KEY: "sk", HOME: "/home/x", PWD: "/cwd" });
    for (const k of ["PORTICO_HOST_TOKEN", "DATABASE_URL", "REDIS_URL"]) expect(all).not.toHaveProperty(k);
    const minimal = agentEnvironment({ command: "a", inheritEnv: "minimal", env: { FOO: "1", PATH: "/opt" } }, "/h", "/c", source);
    expect(minimal).toEqual({ PATH: "/opt", LC_ALL: "C", HOME: "/h", PWD: "/c", FOO: "1" });
  });

  it("places working folders per strategy and keeps an agent installed under /tmp visible to the process sandbox", () => {
    const f = agentFolders({ profile: { command: "a" }, workRoot: "/w", runAs: undefined });
    expect(f.homeDir).toBe("/w/home");
    expect(f.cwdFor("s1")).toBe("/w/sessions/s1");
    expect(agentFolders({ profile: { command: "a", cwd: "intern" }, workRoot: "/w", runAs: undefined }).cwdFor("s1")).toBe("/w/workspace");
    expect(agentFolders({ profile: { command: "a", cwd: { fixed: "/srv/x" } }, workRoot: "/w", runAs: undefined }).cwdFor("s1")).toBe("/srv/x");
    const root = tempRoot();
    const inst = join(root, "node_modules", "agent.js");
    mkdirSync(join(root, "node_modules"));
    writeFileSync(inst, "");
    const dirs = agentInstallDirsUnderTmp([process.execPath, inst]);
    if (root.startsWith("/tmp/")) {
      expect(dirs).toEqual([root]);
      // bound read-only after the private /tmp, so the agent's own files stay visible
      const args = bwrapAgentArgs({ cwd: "/w/s", writable: ["/w/s"], argv: [process.execPath, inst] });
      const at = args.indexOf(root);
      expect(args.slice(at - 1, at + 2)).toEqual(["--ro-bind", root, root]);
      expect(at).toBeGreaterThan(args.indexOf("--tmpfs"));
    } else expect(dirs).toEqual([]);
  });
});

describe("agent stderr summary", () => {
  it("keeps the lines that name the cause, without stack frames, bounded from the end", () => {
    const stderr = "node:internal/modules/cjs/loader:1210\n  throw err;\n  ^\n\nError: Cannot find module '/x'\n    at Module._resolveFilename (node:internal)\n    at Module._load (node:internal) {\n  code: 'MODULE_NOT_FOUND'\n}\n\nNode.js v20\n";
    const s = stderrSummary(stderr);
    expect(s).toContain("Cannot find module '/x'");
    expect(s).toContain("MODULE_NOT_FOUND");
    expect(s).not.toContain("_resolveFilename");
    expect(stderrSummary("y".repeat(1000), 100)).toBe(`…${"y".repeat(100)}`);
  });
});
