/**
 * The host engine without a link: the bounded per-run queue, the paused-run limit, idle agent
 * reaping and how a reaped session comes back (resume, load or new).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import { create } from "@bufbuild/protobuf";
import { ApprovalMode, StartRunSchema, type RunEvent } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { createHostEngine, sessionFolderName, type HostEngine } from "../../../src/host/engine.js";
import { resolveLimits, type InternHostLimits } from "../../../src/host/options.js";
import { scriptedAgentLauncher, type ScriptedAgentConfig } from "../../fixtures/scripted-agent.js";
import { waitFor } from "../../helpers/wait.js";

let engine: HostEngine | undefined;
const roots: string[] = [];
afterEach(async () => {
  await engine?.close();
  engine = undefined;
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

const seen: string[] = [];

function make(limits: Partial<InternHostLimits>, config: ScriptedAgentConfig = {}): HostEngine {
  seen.length = 0;
  const workRoot = mkdtempSync(join(tmpdir(), "portico-engine-"));
  roots.push(workRoot);
  engine = createHostEngine({
    profile: { command: "unused" },
    workRoot,
    limits: resolveLimits(limits),
    logger: pino({ level: "silent" }),
    runAs: undefined,
    bwrap: undefined,
    launcher: scriptedAgentLauncher(config, { observe: (e) => seen.push(e.type) }),
    hostVersion: "test",
    onReadable: () => {},
    onCapacity: () => {},
  });
  return engine;
}

function start(e: HostEngine, runId: string, sessionId: string, prompt: unknown, manual = false): void {
  e.startRun(
    create(StartRunSchema, {
      runId,
      sessionId,
      prompt: typeof prompt === "string" ? prompt : JSON.stringify(prompt),
      approvalMode: manual ? ApprovalMode.MANUAL : ApprovalMode.SELF_DRIVE,
    }),
  );
}

function drain(e: HostEngine, into: RunEvent[]): RunEvent[] {
  for (let ev = e.takeEvent(); ev; ev = e.takeEvent()) into.push(ev);
  return into;
}

const until = (pred: () => boolean, ms = 5000): Promise<unknown> => waitFor(`${pred}`, pred, { timeoutMs: ms, intervalMs: 20 });

describe("host engine", () => {
  it("fails a run with attachment_failed (410) when its queue overflows, without seq gaps", async () => {
    const e = make({ maxQueuedBytesPerRun: 20_000 });
    start(e, "r1", "s1", { steps: [{ flood: { chunks: 100, size: 1000 } }] });
    await until(() => e.capacity().runningRuns === 0);
    const events = drain(e, []);
    expect(events.map((x) => x.seq)).toEqual(events.map((_, i) => BigInt(i + 1)));
    const last = events.at(-1)!;
    expect(last.event.case).toBe("turnFailed");
    expect(last.event.value).toMatchObject({ code: 410, reason: "attachment_failed" });
    expect(events.filter((x) => x.event.case === "content").length).toBeLessThan(20);
    expect(seen).toContain("cancel");
  });

  it("refuses to hold more paused runs than allowed", async () => {
    const e = make({ maxPausedRuns: 1 });
    const q = { steps: [{ sleep: 150 }, { question: {} }] };
    start(e, "r1", "s1", q, true);
    start(e, "r2", "s2", q, true);
    const events: RunEvent[] = [];
    await until(() => drain(e, events).some((x) => x.event.case === "turnFailed"));
    const failed = events.find((x) => x.event.case === "turnFailed")!;
    expect(failed.event.value).toMatchObject({ code: 503, reason: "busy", retryable: true });
    expect(events.filter((x) => x.event.case === "question")).toHaveLength(1);
    // with one run paused, a new run is refused at once
    start(e, "r3", "s3", "hi");
    drain(e, events);
    expect(events.find((x) => x.runId === "r3")?.event).toMatchObject({ case: "rejected", value: { reason: "busy" } });
  });

  it("reaps idle agents and brings sessions back with resume, load or a new session", async () => {
    for (const [config, expected] of [
      [{ resume: true }, "resume"],
      [{ loadSession: true }, "load"],
      [{}, "new"],
    ] as const) {
      const e = make({ idleAgentTtlMs: 300 }, config);
      start(e, "r1", "s1", "one");
      await until(() => e.capacity().runningRuns === 0);
      expect(e.sessions()[0]!.agentAlive).toBe(true);
      await until(() => !e.sessions()[0]!.agentAlive, 5000);
      start(e, "r2", "s1", "two");
      await until(() => e.capacity().runningRuns === 0);
      const events = drain(e, []);
      expect(events.filter((x) => x.event.case === "turnEnded")).toHaveLength(2);
      expect(seen.filter((t) => t === "new" || t === "resume" || t === "load")).toEqual(["new", expected]);
      await e.close();
      engine = undefined;
    }
  });

  it("confines fs/write_text_file to the working folder, also through a dangling symlink", async () => {
    const e = make({});
    const workRoot = roots.at(-1)!;
    const cwd = join(workRoot, "sessions", "s1");
    const outside = join(workRoot, "outside");
    mkdirSync(cwd, { recursive: true });
    mkdirSync(outside);
    // A link to a file that does not exist yet: following it would create the file outside.
    symlinkSync(join(outside, "planted"), join(cwd, "dangling"));
    const steps = [
      { writeFile: { path: join(cwd, "ok.txt"), content: "inside" } },
      { writeFile: { path: join(outside, "direct"), content: "x" } },
      { writeFile: { path: join(cwd, "dangling"), content: "x" } },
      { writeFile: { path: join(cwd, "dangling", "..", "..", "outside", "dotdot"), content: "x" } },
    ];
    start(e, "r1", "s1", { steps }, true);
    await until(() => e.capacity().runningRuns === 0);
    const texts = drain(e, []).flatMap((x) => (x.event.case === "content" ? [x.event.value.text] : []));
    expect(texts).toEqual(["[write ok]", "[write error]", "[write error]", "[write error]"]);
    expect(readFileSync(join(cwd, "ok.txt"), "utf8")).toBe("inside");
    expect(existsSync(join(outside, "planted"))).toBe(false);
    expect(existsSync(join(outside, "direct"))).toBe(false);
    expect(existsSync(join(outside, "dotdot"))).toBe(false);
  });

  it("names session folders safely", () => {
    expect(sessionFolderName("sess-1")).toBe("sess-1");
    expect(sessionFolderName("../etc")).toMatch(/^h-[0-9a-f]{32}$/);
    expect(sessionFolderName("a/b")).toMatch(/^h-/);
    expect(sessionFolderName("x".repeat(200))).toMatch(/^h-/);
  });
});

/** Runs a manual script, answers its first question and returns every event of the finished run. */
async function runAnswering(e: HostEngine, steps: unknown[], value: string): Promise<RunEvent[]> {
  start(e, "r1", "s1", { steps }, true);
  const events: RunEvent[] = [];
  await until(() => drain(e, events).some((x) => x.event.case === "question"));
  const q = events.find((x) => x.event.case === "question")!.event.value as { interactionId: string };
  e.answer("r1", q.interactionId, value);
  await until(() => e.capacity().runningRuns === 0);
  return drain(e, events);
}

describe("host engine: agent cap, sealed escalation, authentication, start failures", () => {
  it("keeps at most maxAgents agents: the least recently used idle one is evicted and comes back with resume", async () => {
    const e = make({ maxAgents: 2 }, { resume: true });
    for (const [i, s] of ["a", "b", "c", "a"].entries()) {
      start(e, `r${i}`, s, "hi");
      await until(() => e.capacity().runningRuns === 0);
      expect(e.sessions().filter((x) => x.agentAlive).length).toBeLessThanOrEqual(2);
    }
    const alive = e.sessions().filter((x) => x.agentAlive).map((x) => x.sessionId).sort();
    expect(alive).toEqual(["a", "c"]);
    // a was evicted when c started, b when a came back; a came back with session/resume
    expect(seen.filter((t) => t === "new" || t === "resume")).toEqual(["new", "new", "new", "resume"]);
    expect(drain(e, []).filter((x) => x.event.case === "turnEnded")).toHaveLength(4);
  });

  it("refuses a run (busy) when every agent at the cap serves a run", async () => {
    const e = make({ maxAgents: 1 });
    start(e, "r1", "a", { steps: [{ hang: {} }] });
    await until(() => drain(e, []).length > 0 || e.sessions()[0]?.agentAlive === true);
    start(e, "r2", "b", "hi");
    const events: RunEvent[] = [];
    await until(() => drain(e, events).some((x) => x.runId === "r2"));
    expect(events.find((x) => x.runId === "r2")?.event).toMatchObject({ case: "rejected", value: { reason: "busy" } });
  });

  it("manual mode: an allow answer unseals only the command its tool call named, once", async () => {
    // bwrap undefined: a sandboxed terminal is refused, so which command ran unsandboxed is visible.
    const e = make({});
    const steps = [
      { question: { kind: "execute", rawInput: { command: "echo APPROVED" } } },
      { terminal: { command: "echo APPROVED" } },
      { terminal: { command: "echo APPROVED" } },
    ];
    const events = await runAnswering(e, steps, "allow_once");
    const texts = events.flatMap((x) => (x.event.case === "content" ? [x.event.value.text] : []));
    expect(texts).toContain("APPROVED\n");
    expect(texts.filter((t) => t === "APPROVED\n")).toHaveLength(1);
    // the repeat was sandboxed, and without bubblewrap a sandboxed command is refused
    expect(events.at(-1)!.event.case).toBe("turnFailed");
  });

  it("a question whose tool call names no command escalates nothing", async () => {
    const e = make({});
    const events = await runAnswering(e, [{ question: { kind: "execute" } }, { terminal: { command: "echo X" } }], "allow_always");
    expect(events.some((x) => x.event.case === "content" && x.event.value.text === "X\n")).toBe(false);
    expect(events.at(-1)!.event).toMatchObject({ case: "turnFailed" });
  });

  it("calls ACP authenticate with the profile's auth method before session/new", async () => {
    const e = make({}, { requireAuth: "openai-api-key" });
    start(e, "r1", "s1", "hi");
    await until(() => e.capacity().runningRuns === 0);
    // without the profile's authMethod the agent answers "Authentication required"
    const failed = drain(e, []);
    expect(failed.at(-1)!.event).toMatchObject({ case: "rejected", value: { reason: "turn_failed" } });
    expect((failed.at(-1)!.event.value as { message: string }).message).toMatch(/Authentication required.*"authMethod" to one of: openai-api-key/);
    await e.close();
    engine = undefined;

    const workRoot = mkdtempSync(join(tmpdir(), "portico-engine-"));
    roots.push(workRoot);
    seen.length = 0;
    engine = createHostEngine({
      profile: { command: "unused", authMethod: "openai-api-key" },
      workRoot,
      limits: resolveLimits({}),
      logger: pino({ level: "silent" }),
      runAs: undefined,
      bwrap: undefined,
      launcher: scriptedAgentLauncher({ requireAuth: "openai-api-key" }, { observe: (ev) => seen.push(ev.type) }),
      hostVersion: "test",
      onReadable: () => {},
      onCapacity: () => {},
    });
    start(engine, "r2", "s1", "hi");
    await until(() => engine!.capacity().runningRuns === 0);
    expect(drain(engine, []).at(-1)!.event.case).toBe("turnEnded");
    expect(seen.slice(0, 2)).toEqual(["authenticate", "new"]);
  });
});

describe("host engine: an agent that cannot start", () => {
  it("rejects the run with the reason and the tail of the agent's stderr, logged at info level", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "portico-engine-"));
    roots.push(workRoot);
    const lines: string[] = [];
    const script = "process.stderr.write(\"Error: Cannot find module '/opt/agent/dist/index.js'\\n  code: 'MODULE_NOT_FOUND'\\n\"); process.exit(1)";
    engine = createHostEngine({
      profile: { command: process.execPath, args: ["-e", script] },
      workRoot,
      limits: resolveLimits({}),
      logger: pino({ level: "info" }, { write: (l: string) => void lines.push(l) }),
      runAs: undefined,
      bwrap: undefined,
      hostVersion: "test",
      onReadable: () => {},
      onCapacity: () => {},
    });
    start(engine, "r1", "s1", "hi");
    const events: RunEvent[] = [];
    await until(() => drain(engine!, events).length > 0, 20_000);
    const ev = events[0]!.event;
    expect(ev.case).toBe("rejected");
    const message = (ev.value as { message: string }).message;
    expect(message).toMatch(/exited with code 1/);
    expect(message).toContain("MODULE_NOT_FOUND");
    const logged = lines.map((l) => JSON.parse(l) as { level: number; msg: string; reason?: string }).find((l) => l.msg === "agent failed to start");
    expect(logged?.level).toBe(30);
    expect(logged?.reason).toContain("MODULE_NOT_FOUND");
    expect(engine.sessions()[0]!.agentAlive).toBe(false);
  });

  it("a start that fails before any process exists frees its agent slot", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "portico-engine-"));
    roots.push(workRoot);
    engine = createHostEngine({
      profile: { command: "unused", sandbox: "process" },
      workRoot,
      limits: resolveLimits({ maxAgents: 1 }),
      logger: pino({ level: "silent" }),
      runAs: undefined,
      bwrap: undefined,
      launcher: scriptedAgentLauncher(),
      hostVersion: "test",
      onReadable: () => {},
      onCapacity: () => {},
    });
    const events: RunEvent[] = [];
    for (const runId of ["r1", "r2", "r3"]) {
      start(engine, runId, `s-${runId}`, "hi");
      await until(() => drain(engine!, events).some((x) => x.runId === runId));
      expect(events.find((x) => x.runId === runId)!.event).toMatchObject({ case: "rejected", value: { reason: "turn_failed" } });
      expect((events.find((x) => x.runId === runId)!.event.value as { message: string }).message).toMatch(/bubblewrap/);
    }
  });

  it("forgets an ended session without an agent after the session record TTL", async () => {
    const e = make({ idleAgentTtlMs: 250, sessionRecordTtlMs: 400 });
    start(e, "r1", "s1", "one");
    await until(() => e.capacity().runningRuns === 0);
    expect(e.sessions()).toHaveLength(1);
    await until(() => e.sessions().length === 0, 10_000);
  });
});

/** Runs one prompt of a session to its end; returns its events. */
async function runOnce(e: HostEngine, runId: string, sessionId: string, prompt: unknown): Promise<RunEvent[]> {
  start(e, runId, sessionId, prompt);
  const events: RunEvent[] = [];
  await until(() => drain(e, events).some((x) => x.runId === runId && ["turnEnded", "turnFailed", "rejected", "runEnded"].includes(x.event.case ?? "")));
  return events.filter((x) => x.runId === runId);
}

const textsOf = (events: RunEvent[], c: "content" | "reasoning"): string =>
  events.flatMap((x) => (x.event.case === c ? [(x.event.value as { text: string }).text] : [])).join("");

describe("host engine: a session that comes back after a reap or an eviction", () => {
  const geminiLoadFailure = { code: -32603, message: "Internal error", data: "No previous sessions found for this project." };

  it("falls back to a new agent session when session/load fails, says so in the stream, and is not stuck", async () => {
    const e = make({ idleAgentTtlMs: 300 }, { loadSession: true, loadFails: geminiLoadFailure });
    expect((await runOnce(e, "r1", "s1", "one")).at(-1)?.event.case).toBe("turnEnded");
    await until(() => e.sessions()[0]?.agentAlive === false);
    const second = await runOnce(e, "r2", "s1", "two");
    expect(second.at(-1)?.event.case).toBe("turnEnded");
    expect(textsOf(second, "content")).toBe("echo: two");
    // The stream says the earlier conversation is gone, with the agent's own words for why.
    expect(textsOf(second, "reasoning")).toMatch(/could not restore.*session\/load.*No previous sessions found for this project\..*new agent session/s);
    expect(seen.filter((t) => t === "new" || t === "load")).toEqual(["new", "load", "new"]);
    // The next prompt goes on in that new session without a note.
    const third = await runOnce(e, "r3", "s1", "three");
    expect(third.at(-1)?.event.case).toBe("turnEnded");
    expect(textsOf(third, "reasoning")).toBe("");
  });

  it("falls back to a new agent session when session/resume fails", async () => {
    const e = make({ maxAgents: 1 }, { resume: true, resumeFails: { code: -32603, message: "Internal error", data: { details: "session file missing" } } });
    await runOnce(e, "r1", "a", "one");
    await runOnce(e, "r2", "b", "two"); // evicts a
    const back = await runOnce(e, "r3", "a", "three");
    expect(back.at(-1)?.event.case).toBe("turnEnded");
    expect(textsOf(back, "reasoning")).toContain("session/resume: Internal error: session file missing");
    expect(seen.filter((t) => t === "new" || t === "resume")).toEqual(["new", "new", "resume", "new"]);
  });

  it("carries the agent's error detail (error.data) into a start failure", async () => {
    const e = make({}, { newFails: { code: -32603, message: "Internal error", data: { message: "model quota exhausted" } } });
    const events = await runOnce(e, "r1", "s1", "hi");
    expect(events.at(-1)?.event).toMatchObject({ case: "rejected", value: { reason: "turn_failed" } });
    expect((events.at(-1)!.event.value as { message: string }).message).toBe("the agent could not be started: Internal error: model quota exhausted");
  });

  it("does not forward history an agent replays after its session/load answer (gemini-cli)", async () => {
    const e = make({ idleAgentTtlMs: 300 }, { loadSession: true, replay: { text: "REPLAYED HISTORY", after: true, delayMs: 30 } });
    await runOnce(e, "r1", "s1", "one");
    await until(() => e.sessions()[0]?.agentAlive === false);
    const second = await runOnce(e, "r2", "s1", { steps: [{ sleep: 300 }, { content: "fresh answer" }] });
    expect(seen.filter((t) => t === "new" || t === "load")).toEqual(["new", "load"]);
    expect(textsOf(second, "content")).toBe("fresh answer");
  });

  it("does not forward history replayed before the session/load answer either", async () => {
    const e = make({ idleAgentTtlMs: 300 }, { loadSession: true, replay: { text: "REPLAYED HISTORY" } });
    await runOnce(e, "r1", "s1", "one");
    await until(() => e.sessions()[0]?.agentAlive === false);
    const second = await runOnce(e, "r2", "s1", "two");
    expect(textsOf(second, "content")).toBe("echo: two");
  });
});
