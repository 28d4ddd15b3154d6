/**
 * The host engine: runs (one ACP prompt turn each) over the sessions of the agent pool, and the
 * link-facing surface. It knows nothing about the transport: the link calls startRun/answer/cancelRun
 * and pulls events. What agents call (updates, permission requests, terminals, fs) is handled in
 * acp-client.ts, which feeds runs through the engine's RunControl.
 *
 * Modules: acp-client.ts (ACP client handlers), run.ts (the run record), agent-session.ts (agents and
 * sessions), agent-env.ts (folders and environment), file-access.ts (fs confinement), questions.ts +
 * escalation.ts (questions and sealed escalation), event-queue.ts (bounded per-run queues).
 */
import { basename } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { acpRuntime } from "./acp-runtime.js";
import type { Logger } from "pino";
import { AnswerOutcome, ApprovalMode, CancelReason, type HeldRun, type RunEvent, type StartRun } from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { createAcpClient } from "./acp-client.js";
import { spawnAgentProcess, type AgentLauncher } from "./agent-process.js";
import { agentFolders } from "./agent-env.js";
import { AgentCapReached, AgentStartError, createAgentPool, type AgentInstance } from "./agent-session.js";
import { EscalationLedger } from "./escalation.js";
import { RunEventQueue, takeRoundRobin, type EventInit } from "./event-queue.js";
import { acpErrorText, clip, usageFromTurn } from "./mapping.js";
import type { AgentProfile, InternHostLimits } from "./options.js";
import { escalates, judgeAnswer, QuestionQueue, type PendingQuestion } from "./questions.js";
import type { CancelCause, Run, Session } from "./run.js";
import { Reason, ruleOf } from "../contract/reasons.js";
import { createModelRelay } from "./model-relay.js";

export { sessionFolderName } from "./agent-env.js";

export interface EngineOptions {
  profile: AgentProfile;
  workRoot: string;
  limits: InternHostLimits;
  logger: Logger;
  runAs: { uid: number; gid: number } | undefined;
  bwrap: string | undefined;
  launcher?: AgentLauncher | undefined;
  hostVersion: string;
  /** Called when events become available to the link. */
  onReadable: () => void;
  /** Called when running/paused counts change. */
  onCapacity: () => void;
  /** CA bundle (PEM) that verifies an https model gateway (the link's); default: the system CAs. */
  gatewayCa?: string | Buffer | undefined;
}

/** Snapshot of a session for diagnostics and tests. */
export interface SessionInfo {
  sessionId: string;
  cwd: string;
  /** Agent process id (= its process group id); undefined when no agent runs or in-process. */
  agentPid: number | undefined;
  agentAlive: boolean;
  runId: string | undefined;
}

export interface HostEngine {
  startRun(msg: StartRun): void;
  answer(runId: string, interactionId: string, answer: string): AnswerOutcome;
  cancelRun(runId: string, reason: CancelReason): void;
  /** Next event for the link, round-robin across runs; undefined when none. */
  takeEvent(): RunEvent | undefined;
  /** The link broke: streaming runs are cancelled, paused runs held for the grace period. */
  linkDown(): void;
  /** Runs to announce in Hello after a reconnect. */
  heldRuns(): HeldRun[];
  /** Welcome arrived: held runs resume, except those the core cancels. */
  linkUp(cancelRunIds: readonly string[]): void;
  capacity(): { runningRuns: number; pausedRuns: number; busy: boolean };
  sessions(): SessionInfo[];
  agentName(): string;
  /** Stops every run and agent process (and its process group); resolves when they are gone. */
  close(): Promise<void>;
}

export function createHostEngine(opts: EngineOptions): HostEngine {
  const { limits, logger, profile } = opts;
  const runs = new Map<string, Run>();
  let rrCursor = 0;
  let closed = false;
  let linkIsUp = true;
  const folders = agentFolders({ profile, workRoot: opts.workRoot, runAs: opts.runAs });
  const relay = createModelRelay({ logger, ca: opts.gatewayCa });
  const pool = createAgentPool<Run>({
    profile,
    limits,
    logger,
    folders,
    runAs: opts.runAs,
    bwrap: opts.bwrap,
    launcher: opts.launcher ?? spawnAgentProcess,
    hostVersion: opts.hostVersion,
    relay,
    relayTarget: (session) => {
      const run = activeRunOf(session);
      return run?.gateway ? { runId: run.id, baseUrl: run.gateway.baseUrl, token: run.gateway.token } : undefined;
    },
    clientApp: createAcpClient({
      profile,
      logger,
      folders,
      runAs: opts.runAs,
      bwrap: opts.bwrap,
      runs: { activeRunOf, emit, reportModel, present, onCapacity: () => opts.onCapacity() },
    }),
  });

  const reaper = setInterval(() => pool.reap(), Math.max(250, Math.min(limits.idleAgentTtlMs / 2, 30_000)));
  reaper.unref();

  function activeRunOf(session: Session): Run | undefined {
    return session.run && session.run.state !== "done" ? session.run : undefined;
  }

  // ---------- events ----------

  function emit(run: Run, ev: EventInit): void {
    if (run.detached) return;
    const res = run.events.push(ev);
    if (res === "overflow") {
      logger.warn({ runId: run.id, queuedBytes: run.events.queuedBytes }, "run event queue overflow; failing the run");
      failRun(run, Reason.ATTACHMENT_FAILED, "the run produced more output than the intern host retains", false);
      return;
    }
    if (res === "queued") opts.onReadable();
  }

  function failRun(run: Run, reason: Reason, message: string, retryable: boolean): void {
    emit(run, { case: "turnFailed", value: turnFailed(reason, message, retryable) });
    if (run.state === "starting" || run.state === "streaming") cancel(run, "failed");
  }

  // ---------- capacity ----------

  function activeRuns(): Run[] {
    return [...runs.values()].filter((r) => r.state !== "done");
  }

  function pausedCount(): number {
    return activeRuns().filter((r) => r.questions.presented !== undefined).length;
  }

  function capacity(): { runningRuns: number; pausedRuns: number; busy: boolean } {
    const running = activeRuns().length;
    const paused = pausedCount();
    return { runningRuns: running, pausedRuns: paused, busy: running >= limits.maxConcurrentRuns || paused >= limits.maxPausedRuns };
  }

  // ---------- questions and model (for the ACP client handlers) ----------

  function reportModel(run: Run, model: string): void {
    if (run.model === model) return;
    run.model = model;
    emit(run, { case: "model", value: { model } });
  }

  function present(run: Run, q: PendingQuestion): void {
    if (pausedCount() >= limits.maxPausedRuns) {
      q.settle({ outcome: "cancelled" });
      failRun(run, Reason.HOST_BUSY, "the intern host holds as many paused runs as it can", true);
      return;
    }
    run.questions.presented = q;
    const value: { interactionId: string; kind: string; options: string[]; operation?: string; arguments?: JsonObject } = {
      interactionId: q.id,
      kind: "permission",
      options: q.kinds,
    };
    if (q.operation !== undefined) value.operation = q.operation;
    // What the agent asked to run goes to the caller as `tool` in the question's arguments.
    if (q.tool) value.arguments = { tool: q.tool };
    emit(run, { case: "question", value });
    q.timer = setTimeout(() => {
      logger.info({ runId: run.id, interactionId: q.id }, "interaction deadline passed on the host; cancelling the run");
      cancel(run, "deadline");
    }, run.interactionDeadlineMs);
    q.timer.unref();
    opts.onCapacity();
  }

  // ---------- runs ----------

  function reject(runId: string, reason: Reason.HOST_BUSY | Reason.TIMEOUT | Reason.TURN_FAILED, message: string): void {
    const session: Session = { key: "", cwd: "", agent: undefined, starting: undefined, previousAcpSessionId: undefined, run: undefined, lastUsed: 0 };
    const run = newRun(runId, session, "self-drive", 0);
    runs.set(runId, run);
    emit(run, { case: "rejected", value: rejected(reason, message) });
    run.state = "done";
  }

  function newRun(id: string, session: Session, mode: Run["mode"], deadlineMs: number): Run {
    return {
      id,
      session,
      mode,
      state: "starting",
      events: new RunEventQueue(id, limits.maxQueuedBytesPerRun),
      detached: false,
      held: false,
      questions: new QuestionQueue(),
      cancelCause: undefined,
      interactionDeadlineMs: deadlineMs > 0 ? deadlineMs : limits.defaultInteractionDeadlineMs,
      escalation: new EscalationLedger(),
      costAtStart: undefined,
      model: undefined,
      gateway: undefined,
    };
  }

  function startRun(msg: StartRun): void {
    if (closed) return;
    if (runs.has(msg.runId)) {
      logger.warn({ runId: msg.runId }, "duplicate StartRun ignored");
      return;
    }
    const cap = capacity();
    if (cap.runningRuns >= limits.maxConcurrentRuns) return reject(msg.runId, Reason.HOST_BUSY, "the intern host runs as many runs as it can");
    if (cap.pausedRuns >= limits.maxPausedRuns) return reject(msg.runId, Reason.HOST_BUSY, "the intern host holds as many paused runs as it can");
    const session = pool.session(msg.sessionId);
    if (session.run && session.run.state !== "done") return reject(msg.runId, Reason.HOST_BUSY, "the session already has a run");
    const mode = msg.approvalMode === ApprovalMode.MANUAL ? "manual" : "self-drive";
    const run = newRun(msg.runId, session, mode, Number(msg.interactionDeadlineMs));
    const gw = msg.gateway;
    if (gw && gw.baseUrl && gw.token) {
      run.gateway = { baseUrl: gw.baseUrl.replace(/\/+$/, ""), token: gw.token, expiresAtMs: Number(gw.expiresAtMs), model: gw.model };
    }
    runs.set(run.id, run);
    session.run = run;
    session.lastUsed = Date.now();
    opts.onCapacity();
    logger.info({ runId: run.id, session: session.key, mode, gateway: run.gateway !== undefined }, "run starting");
    void driveRun(run, msg.prompt).catch((err: unknown) => {
      logger.error({ err, runId: run.id }, "run driver failed");
      finishRun(run);
    });
  }

  async function driveRun(run: Run, prompt: string): Promise<void> {
    const session = run.session;
    let agent: AgentInstance;
    try {
      agent = await pool.ensureAgent(session, run.gateway ? { model: run.gateway.model } : undefined);
    } catch (err) {
      const timeout = err instanceof AgentStartError && err.timeout;
      const message = clip(err instanceof Error ? err.message : String(err), 800);
      // The reason (with the tail of the agent's stderr) is logged at info level and sent to the client.
      logger.info({ runId: run.id, session: session.key, reason: message }, timeout ? "agent start budget exceeded" : "agent failed to start");
      if (run.cancelCause) emit(run, { case: "runEnded", value: { cancelled: true, deadline: false } });
      else if (err instanceof AgentCapReached) emit(run, { case: "rejected", value: rejected(Reason.HOST_BUSY, err.message) });
      else
        emit(run, {
          case: "rejected",
          value: timeout
            ? rejected(Reason.TIMEOUT, `the agent did not start within its start budget${message.includes("stderr") ? ` (${message})` : ""}`)
            : rejected(Reason.TURN_FAILED, `the agent could not be started: ${message}`),
        });
      finishRun(run);
      return;
    }
    if (run.cancelCause) {
      emit(run, { case: "runEnded", value: { cancelled: true, deadline: run.cancelCause === "deadline" || run.cancelCause === "duration" } });
      finishRun(run);
      return;
    }
    const wantMode = run.mode === "manual" ? profile.modes?.manual : profile.modes?.selfDrive;
    if (wantMode && wantMode !== agent.currentModeId && agent.availableModes.has(wantMode)) {
      try {
        await agent.conn.agent.request(acpRuntime().methods.agent.session.setMode, { sessionId: agent.acpSessionId, modeId: wantMode });
        agent.currentModeId = wantMode;
      } catch (err) {
        logger.warn({ runId: run.id, err }, "session/set_mode failed; continuing in the agent's current mode");
      }
    }
    if (run.cancelCause || agent.dead) {
      if (agent.dead) emit(run, { case: "turnFailed", value: turnFailed(Reason.TURN_FAILED, `the agent process ${agent.exitInfo ?? "ended"} before the turn`, true) });
      else emit(run, { case: "runEnded", value: { cancelled: true, deadline: false } });
      finishRun(run);
      return;
    }
    run.costAtStart = agent.lastCost;
    run.state = "streaming";
    const promptDone = agent.conn.agent.request(acpRuntime().methods.agent.session.prompt, {
      sessionId: agent.acpSessionId,
      prompt: [{ type: "text", text: prompt }],
      // The run's model (the built-in agent uses it for its chat completions call); other agents ignore it.
      ...(run.gateway?.model ? { _meta: { portico: { model: run.gateway.model } } } : {}),
    });
    emit(run, { case: "started", value: {} });
    if (agent.restoreNote) {
      // The caller's earlier conversation is gone on the agent's side: the stream says so (as reasoning, not answer text).
      emit(run, { case: "reasoning", value: { text: `${agent.restoreNote}\n` } });
      agent.restoreNote = undefined;
    }
    if (agent.model) reportModel(run, agent.model);
    run.durationTimer = setTimeout(() => cancel(run, "duration"), limits.maxRunDurationMs);
    run.durationTimer.unref();
    try {
      const res = await promptDone;
      const deadline = run.cancelCause === "deadline" || run.cancelCause === "duration";
      // Every ending carries the usage the agent reported for the turn (tokens, or its cost so far).
      reportTurnUsage(run, agent, res);
      // RunEnded only for a cancel Portico asked for; an agent that ends its own turn as "cancelled"
      // (codex on reject_once) ended the turn normally: TurnEnded carries its stop reason.
      if (run.cancelCause) {
        emit(run, { case: "runEnded", value: { cancelled: true, deadline } });
      } else {
        emit(run, { case: "turnEnded", value: { stopReason: res.stopReason } });
      }
    } catch (err) {
      const deadline = run.cancelCause === "deadline" || run.cancelCause === "duration";
      reportTurnUsage(run, agent, undefined);
      if (run.cancelCause) {
        emit(run, { case: "runEnded", value: { cancelled: true, deadline } });
      } else if (agent.dead || agent.conn.signal.aborted) {
        await Promise.race([agent.channel.exited, new Promise((r) => setTimeout(r, 200))]);
        emit(run, {
          case: "turnFailed",
          value: turnFailed(Reason.TURN_FAILED, `the agent process ${agent.exitInfo ?? "closed its connection"} during the turn`, true),
        });
      } else {
        emit(run, {
          case: "turnFailed",
          value: turnFailed(Reason.TURN_FAILED, `the agent failed the turn: ${acpErrorText(err)}`, false),
        });
      }
    }
    finishRun(run);
  }

  /** `promptResult`: the session/prompt result (its usage or `_meta.quota`); undefined when the turn failed. */
  function reportTurnUsage(run: Run, agent: AgentInstance, promptResult: unknown): void {
    const costDelta = agent.lastCost !== undefined ? agent.lastCost - (run.costAtStart ?? 0) : undefined;
    const usage = usageFromTurn(promptResult, costDelta);
    if (usage) emit(run, { case: "usage", value: usage });
  }

  function finishRun(run: Run): void {
    if (run.state === "done") return;
    run.state = "done";
    run.questions.cancelAll();
    // The held timer stays: a finished run whose events wait for a reconnect is dropped after the grace.
    for (const t of [run.cancelTimer, run.durationTimer]) if (t) clearTimeout(t);
    const session = run.session;
    if (session.run === run) session.run = undefined;
    session.lastUsed = Date.now();
    // Kept until the link has taken its last event (takeEvent deletes it then).
    run.escalation.clear();
    if (run.detached || run.events.length === 0) runs.delete(run.id);
    logger.info({ runId: run.id }, "run finished");
    opts.onCapacity();
  }

  function cancel(run: Run, cause: CancelCause): void {
    if (run.state === "done" || run.cancelCause) return;
    run.cancelCause = cause;
    if (run.state === "starting") return; // driveRun checks cancelCause once the agent is up
    run.state = "cancelling";
    const agent = run.session.agent;
    // ACP order: session/cancel first, then a "cancelled" outcome for every pending permission.
    if (agent && !agent.dead) agent.conn.agent.notify(acpRuntime().methods.agent.session.cancel, { sessionId: agent.acpSessionId }).catch(() => {});
    run.questions.cancelAll();
    opts.onCapacity();
    if (!agent || agent.dead) return;
    run.cancelTimer = setTimeout(() => {
      if (run.state === "done") return;
      logger.warn({ runId: run.id }, "agent did not confirm the cancel in time; stopping its process");
      void agent.channel.dispose(0);
    }, limits.cancelGraceMs);
    run.cancelTimer.unref();
  }

  function answer(runId: string, interactionId: string, value: string): AnswerOutcome {
    const run = runs.get(runId);
    if (!run || run.state !== "streaming" || run.detached) return AnswerOutcome.NOT_PENDING;
    const q = run.questions.presented;
    if (!q || q.id !== interactionId) return AnswerOutcome.NOT_PENDING;
    const judged = judgeAnswer(q, value);
    if (judged.kind === "cancel") {
      cancel(run, "caller");
      return AnswerOutcome.ACCEPTED;
    }
    if (judged.kind === "not_offered") return AnswerOutcome.NOT_OFFERED;
    if (escalates(q, judged.option) && !run.escalation.grant(q.toolCallId, q.rawInput, judged.option === "allow_always")) {
      logger.info({ runId: run.id }, "the approved tool call named no command; its terminals stay sandboxed");
    }
    const next = run.questions.advance();
    q.settle({ outcome: "selected", optionId: judged.optionId });
    if (next) present(run, next);
    opts.onCapacity();
    return AnswerOutcome.ACCEPTED;
  }

  function cancelRun(runId: string, reason: CancelReason): void {
    const run = runs.get(runId);
    if (!run || run.state === "done") return;
    const cause: CancelCause =
      reason === CancelReason.CLIENT_DISCONNECTED ? "client" : reason === CancelReason.DEADLINE ? "deadline" : reason === CancelReason.CALLER ? "caller" : "operator";
    cancel(run, cause);
  }

  function takeEvent(): RunEvent | undefined {
    const taken = takeRoundRobin([...runs.values()], rrCursor, (r) => (r.held || r.detached ? undefined : r.events));
    if (!taken) return undefined;
    rrCursor = taken.cursor;
    const run = taken.owner;
    if (run.state === "done" && run.events.length === 0) runs.delete(run.id);
    return taken.event;
  }

  function dropRun(run: Run): void {
    run.detached = true;
    run.held = false;
    if (run.heldTimer) clearTimeout(run.heldTimer);
    run.events.clear();
    if (run.state === "done") runs.delete(run.id);
  }

  function linkDown(): void {
    if (!linkIsUp) return;
    linkIsUp = false;
    for (const run of [...runs.values()]) {
      if (run.detached || run.held) continue;
      const paused = run.questions.presented !== undefined && run.state === "streaming";
      const finishedWithEvents = run.state === "done" && run.events.length > 0;
      if (paused) {
        run.held = true;
        run.heldTimer = setTimeout(() => {
          logger.info({ runId: run.id }, "held run not reclaimed in time; cancelling it");
          cancel(run, "link");
          dropRun(run);
        }, limits.heldRunGraceMs);
        run.heldTimer.unref();
      } else if (finishedWithEvents) {
        dropRun(run);
      } else {
        logger.info({ runId: run.id }, "link broke while the run was streaming; cancelling it");
        dropRun(run);
        cancel(run, "link");
      }
    }
  }

  function heldRuns(): HeldRun[] {
    return [...runs.values()]
      .filter((r) => r.held && !r.detached)
      .map((r) => ({ runId: r.id, lastSeq: r.events.lastTakenSeq, pendingInteractionId: r.questions.presented?.id ?? "" }) as HeldRun);
  }

  function linkUp(cancelRunIds: readonly string[]): void {
    linkIsUp = true;
    const drop = new Set(cancelRunIds);
    for (const run of [...runs.values()]) {
      if (!run.held) continue;
      if (run.heldTimer) clearTimeout(run.heldTimer);
      run.held = false;
      if (drop.has(run.id)) {
        cancel(run, "operator");
        dropRun(run);
      }
    }
    opts.onReadable();
    opts.onCapacity();
  }

  return {
    startRun,
    answer,
    cancelRun,
    takeEvent,
    linkDown,
    heldRuns,
    linkUp,
    capacity,
    sessions: () =>
      [...pool.entries()].map((s) => ({
        sessionId: s.key,
        cwd: s.cwd,
        agentPid: s.agent?.channel.pid,
        agentAlive: Boolean(s.agent && !s.agent.dead),
        runId: s.run?.id,
      })),
    agentName: () => profile.name ?? basename(profile.command),
    async close() {
      closed = true;
      clearInterval(reaper);
      for (const run of runs.values()) {
        if (run.state !== "done") cancel(run, "operator");
        dropRun(run);
      }
      await pool.closeAll();
      await relay.close();
    },
  };
}

/**
 * A TurnFailed for a reason of the one error table: `reason_value`, plus the wire string and the
 * (deprecated) HTTP number cores of earlier versions read.
 */
function turnFailed(reason: Reason, message: string, retryable: boolean) {
  const rule = ruleOf(reason);
  return { code: rule.status, reason: rule.wire, message, retryable, reasonValue: reason };
}

/** A RunRejected for a reason of the one error table (busy, timeout, turn_failed), with its wire string for earlier cores. */
function rejected(reason: Reason, message: string) {
  return { reason: ruleOf(reason).wire, message, reasonValue: reason };
}
