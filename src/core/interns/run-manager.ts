/**
 * The intern run state machine (the description's "Intern run" table) over the database and the
 * live host links of this process.
 *
 *   none ──user msg──► streaming ──question──► paused ──answer accepted──► streaming
 *   streaming ──turn ended──► finished        paused ──deadline──► cancelled
 *   streaming ──turn failed──► failed         paused ──answer "cancel"──► streaming ──► ended (run_ended)
 *   streaming ──run ended──► ended            streaming ──client gone──► cancelled
 *   streaming ──link lost──► ended (stream_severed)
 *
 * Sessions, runs and interactions live in the database, so an answer may come on any request; each
 * race (two answers, answer vs deadline, two prompts for one session) is settled by a conditional
 * update. In memory we keep only what a live run needs: its event queue, the link it runs on and its
 * deadline timer. The per-session turn lock is InternSession.activeRunId.
 */
import { randomUUID } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { InternChatConfig } from "../../config.js";
import {
  AnswerOutcome,
  ApprovalMode,
  CancelReason,
  type Hello,
  type Question,
  type RunEvent,
  type RunRejected,
  type Usage,
} from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { Intern } from "../../db/prisma.js";
import { errorDetailOf } from "../errors.js";
import {
  answerNotAccepted,
  attachmentFailed,
  hostBusy,
  internError,
  interactionNotPending,
  interactionUnknown,
  internTimeout,
  keyShareUsed,
  internUnreachable,
  noRunToCancel,
  sessionNotFound,
  sessionBusy,
  streamSeveredBeforeStart,
} from "./intern-errors.js";
import { TERMINAL_RUN_STATES, type InternRepository, type RunState, type UsageRecord } from "./intern-repository.js";
import type { InternLink, LinkRegistry } from "./link-registry.js";
import type { Background } from "./background.js";
import type { InternCluster } from "./cluster.js";
import { argumentsOf, questionArguments, sessionToProto } from "./sessions.js";

/** Bytes of undelivered text a run may buffer in the core before it fails with attachment_failed. */
export const MAX_BUFFERED_BYTES_PER_RUN = 8 * 1024 * 1024;
/** How much later than the core's deadline the host's backstop deadline fires. */
const HOST_BACKSTOP_GRACE_MS = 2_000;
/** Retry-After for 503 busy (the host is at capacity). */
const HOST_BUSY_RETRY_AFTER_S = 5;

export type RunItem =
  | { kind: "event"; event: RunEvent["event"]; bytes: number }
  | { kind: "severed" }
  | { kind: "overflow" }
  | { kind: "aborted" }
  /** The run was ended by the core (e.g. cancelled through the API): render this ending. */
  | { kind: "ended"; ending: RunEnding }
  /** The host refused or never started the run after the response opened (role chunk sent). */
  | { kind: "startFailed"; code: number; reason: string; message: string; retryable: boolean };

/** HTTP status of a start failure reason in the finish chunk. */
const START_FAILURE_STATUS: Record<string, number> = { busy: 503, timeout: 504, rate_limited: 429 };

type TerminalCase = "turnEnded" | "turnFailed" | "runEnded";

/** How the response of a run that ends is finished: `stop`, or an error chunk. */
export type RunFinish = { kind: "stop" } | { kind: "error"; code: number; reason: string; message: string; retryable: boolean };

/** A run's end: the state recorded, its end reason and what the client's stream shows. */
export interface RunEnding {
  state: RunState;
  endReason: string;
  finish: RunFinish;
}

/** What ends a live run: a terminal event from the host, or something the core sees on its own. */
export type EndingCause =
  | { on: "turnEnded"; stopReason: string }
  | { on: "turnFailed"; code: number; reason: string; message: string; retryable: boolean }
  | { on: "runEnded"; deadline: boolean }
  | { on: "severed" }
  | { on: "overflow" }
  | { on: "deadline" }
  | { on: "clientGone" }
  | { on: "cancelled" }
  | { on: "notPending" }
  | { on: "hostLost" }
  | { on: "startFailed"; reason: string; clientGone: boolean };

/**
 * The run state machine's one transition table (the description's "Intern run" table):
 *
 *   streaming ──question──► paused            (pause)
 *   paused ──answer accepted──► streaming      (answer)
 *   streaming | paused ──cause──► RUN_ENDINGS[cause]
 *
 * The relay (interns-handler.ts) only renders an ending; the manager records it.
 */
export const RUN_ENDINGS: { [K in EndingCause["on"]]: (c: Extract<EndingCause, { on: K }>) => RunEnding } = {
  // An agent's own "cancelled" (no cancel from Portico: codex on reject_once) is a normal end too.
  turnEnded: (c) => ({
    state: "finished",
    endReason: c.stopReason === "cancelled" ? "agent_cancelled" : c.stopReason || "end_turn",
    finish: { kind: "stop" },
  }),
  turnFailed: (c) => ({
    state: "failed",
    endReason: c.reason || "turn_failed",
    finish: { kind: "error", code: c.code || 502, reason: c.reason || "turn_failed", message: c.message || "The intern failed the turn.", retryable: c.retryable },
  }),
  runEnded: (c) => ({
    state: c.deadline ? "cancelled" : "ended",
    endReason: c.deadline ? "deadline" : "run_ended",
    finish: { kind: "error", code: 410, reason: "run_ended", message: "The intern ended the run.", retryable: false },
  }),
  severed: () => ({
    state: "ended",
    endReason: "stream_severed",
    finish: { kind: "error", code: 502, reason: "stream_severed", message: "The connection to the intern broke without its confirmation.", retryable: true },
  }),
  overflow: () => ({
    state: "failed",
    endReason: "attachment_failed",
    finish: { kind: "error", code: 410, reason: "attachment_failed", message: "The run produced more output than the intern retains for replay.", retryable: false },
  }),
  deadline: () => ({
    state: "cancelled",
    endReason: "deadline",
    finish: { kind: "error", code: 410, reason: "run_ended", message: "The intern ended the run.", retryable: false },
  }),
  clientGone: () => ({ state: "cancelled", endReason: "client_disconnected", finish: { kind: "stop" } }),
  // A caller cancelled the run through the API (CancelSessionRun).
  cancelled: () => ({
    state: "cancelled",
    endReason: "cancelled",
    finish: { kind: "error", code: 410, reason: "run_ended", message: "The run was cancelled.", retryable: false },
  }),
  hostLost: () => ({
    state: "ended",
    endReason: "host_lost",
    finish: { kind: "error", code: 502, reason: "stream_severed", message: "The connection to the intern broke without its confirmation.", retryable: true },
  }),
  // Before the stream opened: the client gets an error response, not a finish chunk.
  startFailed: (c) => ({
    state: c.clientGone ? "cancelled" : c.reason === "stream_severed" ? "ended" : "failed",
    endReason: c.reason,
    finish: { kind: "error", code: 502, reason: c.reason, message: "The run did not start.", retryable: true },
  }),
  notPending: () => ({
    state: "ended",
    endReason: "not_pending",
    finish: { kind: "error", code: 410, reason: "run_ended", message: "The intern ended the run.", retryable: false },
  }),
};

/** The ending a cause leads to (one lookup in RUN_ENDINGS). */
export function endingOf(cause: EndingCause): RunEnding {
  return (RUN_ENDINGS[cause.on] as (c: EndingCause) => RunEnding)(cause);
}

/** The ending cause of a terminal host event; undefined for any other event. */
export function causeOfEvent(e: RunEvent["event"]): EndingCause | undefined {
  switch (e.case) {
    case "turnEnded":
      return { on: "turnEnded", stopReason: e.value.stopReason };
    case "turnFailed":
      return { on: "turnFailed", code: e.value.code, reason: e.value.reason, message: e.value.message, retryable: e.value.retryable };
    case "runEnded":
      return { on: "runEnded", deadline: e.value.deadline };
    default:
      return undefined;
  }
}

/** A run this process is relaying (streaming, or paused on a link of this process). */
export class ActiveRun {
  state: "starting" | "streaming" | "paused" | "done" = "starting";
  link: InternLink | undefined;
  /** The model every chunk of the current response names (fixed when the response opens). */
  model = "";
  /** The latest model the intern reported; the next response of this run names it. */
  reportedModel = "";
  usage: UsageRecord | undefined;
  lastSeq = 0;
  /** A client (StreamChat call) is consuming the queue. */
  attached = false;
  /** Hash of the API key that started the run (unknown for runs taken over after a reconnect). */
  callerKey: string | undefined;
  interaction: { id: string; deadlineAt: Date; arguments: JsonObject } | undefined;
  deadlineTimer: NodeJS.Timeout | undefined;
  startWaiter: { resolve(): void; reject(err: ConnectError): void } | undefined;
  private queue: RunItem[] = [];
  private head = 0;
  queuedBytes = 0;
  private wake: (() => void) | undefined;

  constructor(
    readonly id: string,
    readonly internId: string,
    readonly sessionRowId: string,
    readonly sessionKey: string,
    readonly approvalMode: "manual" | "self-drive",
  ) {}

  push(item: RunItem): void {
    this.queue.push(item);
    if (item.kind === "event") this.queuedBytes += item.bytes;
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Takes the next queued item without waiting. */
  take(): RunItem | undefined {
    if (this.head >= this.queue.length) return undefined;
    const item = this.queue[this.head]!;
    this.queue[this.head] = undefined as unknown as RunItem;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    if (item.kind === "event") this.queuedBytes -= item.bytes;
    return item;
  }

  /** The next item, or undefined after `idleMs` without one (time for a heartbeat). */
  next(idleMs: number): Promise<RunItem | undefined> | RunItem {
    const ready = this.take();
    if (ready) return ready;
    return new Promise<RunItem | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve(undefined);
      }, idleMs);
      this.wake = () => {
        clearTimeout(timer);
        resolve(this.take());
      };
    });
  }

  clearQueue(): void {
    this.queue = [];
    this.head = 0;
    this.queuedBytes = 0;
  }
}

export interface RunManagerDeps {
  repo: InternRepository;
  background: Background;
  links: LinkRegistry;
  cluster: InternCluster;
  config: InternChatConfig;
  instanceId: string;
  logger: Logger;
  /** Word in `<brand>.provide_input`. */
  brand: string;
}

export interface StartRunInput {
  intern: Intern;
  sessionKey: string | undefined;
  prompt: string;
  approvalMode: "manual" | "self-drive";
  /** Hash of the caller's API key: the per-key share of runs held across a question. */
  callerKey?: string;
  signal: AbortSignal;
}

export interface AnswerInput {
  intern: Intern;
  sessionKey: string;
  interactionId: string;
  answer: string;
  signal: AbortSignal;
}

export function usageFromProto(u: Usage): UsageRecord {
  const out: UsageRecord = {
    prompt_tokens: Number(u.promptTokens),
    completion_tokens: Number(u.completionTokens),
    total_tokens: Number(u.totalTokens),
  };
  if (u.cost !== undefined) out.cost = u.cost;
  if (u.cachedTokens !== undefined) out.cached_tokens = Number(u.cachedTokens);
  return out;
}

function isTerminal(c: RunEvent["event"]["case"]): c is TerminalCase {
  return c === "turnEnded" || c === "turnFailed" || c === "runEnded";
}

function eventBytes(e: RunEvent["event"]): number {
  if (e.case === "content" || e.case === "reasoning") return e.value.text.length + 64;
  return 64;
}

function rejectedError(r: RunRejected): ConnectError {
  if (r.reason === "busy") return hostBusy(HOST_BUSY_RETRY_AFTER_S, { slots: "runs", hostMessage: r.message });
  if (r.reason === "timeout") return internTimeout();
  return internError("turn_failed", r.message || "The intern could not start the run.", true);
}

export function createRunManager(deps: RunManagerDeps) {
  const { repo, links, config, logger, background, cluster } = deps;
  const later = (work: () => Promise<unknown>) => background.run(work);
  const runs = new Map<string, ActiveRun>();
  const sweepMs = Math.max(50, Math.min(5_000, Math.floor(config.interactionDeadlineMs / 4)));
  let sweeping = false;
  let closed = false;

  const log = logger.child({ component: "intern-runs" });

  // ---------- terminal transitions ----------

  /** Ends a run in memory at once (so no second path ends it) and then in the database. */
  async function finishRun(run: ActiveRun, state: RunState, endReason: string | undefined): Promise<void> {
    if (run.state === "done") return;
    const hadInteraction = run.interaction !== undefined;
    run.state = "done";
    run.attached = false;
    if (run.deadlineTimer) clearTimeout(run.deadlineTimer);
    run.deadlineTimer = undefined;
    run.interaction = undefined;
    runs.delete(run.id);
    try {
      const extra: Parameters<InternRepository["transitionRun"]>[3] = { usage: run.usage ?? null, lastSeq: run.lastSeq };
      if (endReason !== undefined) extra.endReason = endReason;
      if (run.model) extra.model = run.model;
      await repo.transitionRun(run.id, ["streaming", "paused"], state, extra);
      if (hadInteraction) await repo.voidInteractionsOfRun(run.id);
      await repo.unlockSession(run.sessionRowId, run.id);
    } catch (err) {
      log.error({ err, runId: run.id }, "could not record the end of a run");
    }
  }

  /** Ends a run the way `cause` ends it per the transition table; returns the ending for the relay to render. */
  async function end(run: ActiveRun, cause: EndingCause): Promise<RunEnding> {
    const ending = endingOf(cause);
    await finishRun(run, ending.state, ending.endReason);
    return ending;
  }

  /** A terminal event for a run no client is reading (it paused, then the intern ended it). */
  function finishDetached(run: ActiveRun, e: RunEvent["event"]): void {
    const cause = causeOfEvent(e);
    if (cause) later(() => end(run, cause));
  }

  function overflow(run: ActiveRun): void {
    log.warn({ runId: run.id }, "run buffered more output than the core retains; failing it");
    run.clearQueue();
    run.link?.cancelRun(run.id, CancelReason.OPERATOR);
    if (run.attached) run.push({ kind: "overflow" });
    else later(() => end(run, { on: "overflow" }));
  }

  // ---------- events from links ----------

  function onRunEvent(link: InternLink, ev: RunEvent): void {
    const run = runs.get(ev.runId);
    if (!run || run.link !== link || run.state === "done") {
      log.debug({ runId: ev.runId, event: ev.event.case }, "event for a run this core does not relay; ignored");
      return;
    }
    const seq = Number(ev.seq);
    if (seq !== 0) {
      if (seq <= run.lastSeq) return; // duplicate after a reconnect
      if (seq !== run.lastSeq + 1) log.warn({ runId: run.id, expected: run.lastSeq + 1, got: seq }, "run event sequence gap");
      run.lastSeq = seq;
    }
    const e = ev.event;
    if (run.state === "starting") {
      const waiter = run.startWaiter;
      switch (e.case) {
        case "started":
          run.state = "streaming";
          waiter?.resolve();
          return;
        case "rejected":
          waiter?.reject(rejectedError(e.value));
          return;
        case "turnFailed":
          waiter?.reject(internError(e.value.reason || "turn_failed", e.value.message || "The intern failed the turn.", e.value.retryable));
          return;
        case "runEnded":
          waiter?.reject(internError("turn_failed", "The intern ended the run before it started.", true));
          return;
        default:
          // Anything else means the agent is running: treat as started and keep the event.
          run.state = "streaming";
          waiter?.resolve();
      }
    }
    if (e.case === "started" || e.case === "rejected" || e.case === undefined) return;
    if (e.case === "model") {
      if (e.value.model && e.value.model !== run.model) {
        later(() => repo.setInternModel(run.internId, e.value.model));
      }
      run.reportedModel = e.value.model;
      if (!run.attached) run.model = e.value.model;
    }
    if (e.case === "usage" && !run.attached) run.usage = usageFromProto(e.value);
    if (!run.attached) {
      if (isTerminal(e.case)) finishDetached(run, e);
      else if (e.case !== "model" && e.case !== "usage") run.push({ kind: "event", event: e, bytes: eventBytes(e) });
      return;
    }
    run.push({ kind: "event", event: e, bytes: eventBytes(e) });
    if (run.queuedBytes > MAX_BUFFERED_BYTES_PER_RUN) overflow(run);
  }

  function onLinkClosed(link: InternLink, reason: string): void {
    for (const run of [...runs.values()]) {
      if (run.link !== link) continue;
      if (run.state === "starting") {
        run.startWaiter?.reject(streamSeveredBeforeStart());
      } else if (run.state === "paused") {
        // Held across a short reconnect; the deadline still applies. An answer being delivered
        // (attached) learns of the loss from deliverAnswer ("link_lost") and leaves it paused, so no
        // "severed" marker may stay queued for the continuation after the reconnect.
        run.link = undefined;
      } else if (run.attached) {
        run.push({ kind: "severed" });
      } else {
        later(() => end(run, { on: "severed" }));
      }
    }
    log.info({ internId: link.internId, reason }, "intern link closed");
  }

  // ---------- starting a run ----------

  /** Manual runs one key may hold open on a host that holds `hostPaused` paused runs (0: unbounded). */
  function keyShare(hostPaused: number): number {
    if (config.maxPausedRunsPerKey > 0) return config.maxPausedRunsPerKey;
    return hostPaused > 0 ? Math.max(1, Math.floor(hostPaused / 2)) : Number.POSITIVE_INFINITY;
  }

  async function takeTurnLock(sessionRowId: string, runId: string): Promise<void> {
    if (await repo.lockSession(sessionRowId, runId)) return;
    const session = await repo.findSession(sessionRowId);
    const holderId = session?.activeRunId;
    if (holderId) {
      const holder = await repo.findRun(holderId);
      if (holder && TERMINAL_RUN_STATES.includes(holder.state as RunState)) {
        // A stale lock (its process ended without releasing it): take it over.
        await repo.unlockSession(sessionRowId, holderId);
        if (await repo.lockSession(sessionRowId, runId)) return;
      }
      const active = runs.get(holderId);
      if (active?.interaction) {
        const left = Math.ceil((active.interaction.deadlineAt.getTime() - Date.now()) / 1000);
        throw sessionBusy(Math.max(1, left));
      }
    }
    throw sessionBusy(1);
  }

  async function startRun(input: StartRunInput): Promise<ActiveRun> {
    const { intern } = input;
    const link = links.get(intern.id);
    if (!link) throw internUnreachable();
    if (link.capacity.busy) throw hostBusy(HOST_BUSY_RETRY_AFTER_S, { slots: "runs" });
    let running = 0;
    let paused = 0;
    let heldByKey = 0;
    for (const r of runs.values()) {
      if (r.link !== link) continue;
      running++;
      if (r.state === "paused") paused++;
      if (input.callerKey !== undefined && r.callerKey === input.callerKey && r.approvalMode === "manual") heldByKey++;
    }
    if (input.approvalMode === "manual" && heldByKey >= keyShare(link.hello.maxPausedRuns)) {
      // This key's share of runs held across a question is used up; other keys keep theirs.
      throw keyShareUsed(HOST_BUSY_RETRY_AFTER_S);
    }
    if (link.hello.maxConcurrentRuns > 0 && running >= link.hello.maxConcurrentRuns) {
      throw hostBusy(HOST_BUSY_RETRY_AFTER_S, { slots: "runs", running, max: link.hello.maxConcurrentRuns });
    }
    if (input.approvalMode === "manual" && link.hello.maxPausedRuns > 0 && paused >= link.hello.maxPausedRuns) {
      throw hostBusy(HOST_BUSY_RETRY_AFTER_S, { slots: "paused", paused });
    }

    const runId = randomUUID();
    const sessionKey = input.sessionKey ?? randomUUID();
    let session: { id: string };
    if (input.sessionKey === undefined) {
      session = await repo.createLockedSession(intern.id, sessionKey, runId);
    } else {
      session = await repo.ensureSession(intern.id, sessionKey);
      await takeTurnLock(session.id, runId);
    }
    try {
      await repo.createRun({ id: runId, internId: intern.id, sessionId: session.id, sessionKey, approvalMode: input.approvalMode });
    } catch (err) {
      await repo.unlockSession(session.id, runId);
      throw err;
    }
    const run = new ActiveRun(runId, intern.id, session.id, sessionKey, input.approvalMode);
    run.callerKey = input.callerKey;
    run.link = link;
    run.attached = true;
    run.model = intern.model ?? "";
    runs.set(runId, run);

    const started = new Promise<void>((resolve, reject) => (run.startWaiter = { resolve, reject }));
    const timer = setTimeout(() => run.startWaiter?.reject(internTimeout()), config.startTimeoutMs);
    const onAbort = () => run.startWaiter?.reject(new ConnectError("the client went away", Code.Canceled));
    input.signal.addEventListener("abort", onAbort, { once: true });
    if (input.signal.aborted) onAbort();
    const sent = link.startRun({
      runId,
      sessionId: sessionKey,
      prompt: input.prompt,
      approvalMode: input.approvalMode === "manual" ? ApprovalMode.MANUAL : ApprovalMode.SELF_DRIVE,
      // The host's own backstop fires only if the core could not (link down): later than ours.
      interactionDeadlineMs: BigInt(config.interactionDeadlineMs + config.linkLivenessTimeoutMs + HOST_BACKSTOP_GRACE_MS),
    });
    if (!sent) run.startWaiter?.reject(internUnreachable());
    // The run is accepted: the response opens now (role chunk) while the host starts the agent; a
    // start failure from here on reaches the client as an error finish on the open stream.
    void (async () => {
      try {
        await started;
      } catch (err) {
        const ce = ConnectError.from(err);
        const detail = errorDetailOf(ce);
        const reason = ce.code === Code.Canceled ? "client_disconnected" : (detail?.reason ?? "turn_failed");
        if (ce.code === Code.Canceled) link.cancelRun(runId, CancelReason.CLIENT_DISCONNECTED);
        else if (reason === "timeout") link.cancelRun(runId, CancelReason.OPERATOR);
        await end(run, { on: "startFailed", reason, clientGone: ce.code === Code.Canceled });
        if (ce.code !== Code.Canceled) {
          run.push({ kind: "startFailed", code: START_FAILURE_STATUS[reason] ?? 502, reason, message: ce.rawMessage, retryable: detail?.retryable ?? true });
        }
      } finally {
        clearTimeout(timer);
        input.signal.removeEventListener("abort", onAbort);
        run.startWaiter = undefined;
      }
    })().catch((err: unknown) => log.error({ err, runId }, "could not record a run's failed start"));
    return run;
  }

  // ---------- answering a question ----------

  async function expireInteraction(interactionId: string, runId: string): Promise<void> {
    const won = await repo.setInteractionState(interactionId, ["pending"], "expired");
    if (!won) return;
    log.info({ runId, interactionId }, "interaction deadline passed; cancelling the run");
    // Record the end first, then tell the host: once the intern hears of it, every request sees it.
    const run = runs.get(runId);
    if (run) {
      const link = run.link;
      await end(run, { on: "deadline" });
      if (link) link.cancelRun(runId, CancelReason.DEADLINE);
      // Paused without a link here: the host may have re-attached to another core.
      else await cancelElsewhere(run.internId, runId);
      return;
    }
    const row = await repo.findRun(runId);
    if (!row) return;
    if (await repo.transitionRun(runId, ["paused", "streaming"], "cancelled", { endReason: "deadline" })) {
      await repo.unlockSession(row.sessionId, runId);
    }
    const link = links.get(row.internId);
    if (link) link.cancelRun(runId, CancelReason.DEADLINE);
    else await cancelElsewhere(row.internId, runId);
  }

  /** The run's link is on another core process (or on none: the host's own deadline then ends it). */
  async function cancelElsewhere(internId: string, runId: string): Promise<void> {
    await cluster.cancelRemote(internId, runId, CancelReason.DEADLINE).catch((err: unknown) => log.warn({ err, runId }, "could not publish a cancellation"));
  }

  /**
   * Another process decided to cancel a run (its deadline passed there, or a caller cancelled it there)
   * whose link or stream may be here; that process has already recorded the end.
   */
  cluster.onCancel((internId, runId, reason) => {
    const run = runs.get(runId);
    if (run && run.internId === internId) {
      const link = run.link;
      later(() => endAndTell(run, reason === CancelReason.DEADLINE ? { on: "deadline" } : { on: "cancelled" }));
      link?.cancelRun(runId, reason);
      return;
    }
    links.get(internId)?.cancelRun(runId, reason);
  });

  /** Ends a run here and, when a client is reading it, ends its stream with the ending. */
  async function endAndTell(run: ActiveRun, cause: EndingCause): Promise<void> {
    const attached = run.attached && run.state !== "done";
    const ending = await end(run, cause);
    // A run still waiting for RunStarted needs no start outcome any more: the ending is its outcome.
    run.startWaiter?.resolve();
    if (attached) {
      run.clearQueue();
      run.push({ kind: "ended", ending });
    }
  }

  // ---------- sessions: read, cancel ----------

  async function sessionOf(intern: Intern, sessionKey: string) {
    const session = await repo.findSessionByKey(intern.id, sessionKey);
    if (!session) throw sessionNotFound();
    return session;
  }

  /** The session with its live (or latest) run and the question it waits for. */
  async function getSession(intern: Intern, sessionKey: string) {
    const session = await sessionOf(intern, sessionKey);
    const held = session.activeRunId ? await repo.findRun(session.activeRunId) : null;
    const run = held && !TERMINAL_RUN_STATES.includes(held.state as RunState) ? held : await repo.latestRunOfSession(session.id);
    const pending = run && run.state === "paused" ? await repo.pendingInteractionOfRun(run.id) : null;
    return sessionToProto(sessionKey, run, pending, deps.brand);
  }

  /**
   * Cancels the run holding the session, streaming or paused, wherever it runs: the end is recorded first
   * (so the session is free when this returns), then the host is told, and a stream open on the run ends
   * with a run_ended error finish.
   */
  async function cancelSession(intern: Intern, sessionKey: string) {
    const session = await sessionOf(intern, sessionKey);
    const runId = session.activeRunId;
    if (!runId) throw noRunToCancel();
    const local = runs.get(runId);
    if (local && local.state !== "done") {
      log.info({ runId }, "run cancelled by a caller");
      const link = local.link;
      await endAndTell(local, { on: "cancelled" });
      if (link) link.cancelRun(runId, CancelReason.CALLER);
      else await cluster.cancelRemote(intern.id, runId, CancelReason.CALLER).catch((err: unknown) => log.warn({ err, runId }, "could not publish a cancellation"));
      return getSession(intern, sessionKey);
    }
    const row = await repo.findRun(runId);
    const ending = endingOf({ on: "cancelled" });
    if (!row || !(await repo.transitionRun(runId, ["streaming", "paused"], ending.state, { endReason: ending.endReason }))) {
      // Already over (a stale lock): release it; there is nothing to cancel.
      await repo.unlockSession(session.id, runId);
      throw noRunToCancel();
    }
    log.info({ runId }, "run cancelled by a caller (relayed elsewhere)");
    await repo.voidInteractionsOfRun(runId);
    await repo.unlockSession(session.id, runId);
    // The process relaying it (if any) ends its stream; the host holding it cancels it.
    const link = links.get(intern.id);
    if (link) link.cancelRun(runId, CancelReason.CALLER);
    await cluster.cancelRemote(intern.id, runId, CancelReason.CALLER).catch((err: unknown) => log.warn({ err, runId }, "could not publish a cancellation"));
    return getSession(intern, sessionKey);
  }

  function scheduleDeadline(run: ActiveRun): void {
    if (run.deadlineTimer) clearTimeout(run.deadlineTimer);
    const inter = run.interaction;
    if (!inter) return;
    run.deadlineTimer = setTimeout(
      () => later(() => expireInteraction(inter.id, run.id)),
      Math.max(0, inter.deadlineAt.getTime() - Date.now()),
    );
    run.deadlineTimer.unref();
  }

  /**
   * The error for a question that is no longer pending while its run has not (yet) ended. Per the
   * description, 409 interaction_not_pending is for a run that has ended: a question expired by its
   * deadline or voided/cancelled with its run. One answered (or being answered) while the run lives on
   * is simply no pending question: 404 interaction_unknown.
   */
  function notPending(state: string): Error {
    return state === "answered" || state === "delivering" ? interactionUnknown() : interactionNotPending();
  }

  async function answer(input: AnswerInput): Promise<ActiveRun> {
    const now = new Date();
    const inter = await repo.findInteraction(input.interactionId);
    if (!inter) throw interactionUnknown();
    const row = await repo.findRun(inter.runId);
    if (!row || row.internId !== input.intern.id || row.sessionKey !== input.sessionKey) throw interactionUnknown();
    if (inter.state === "pending" && inter.deadlineAt.getTime() <= now.getTime()) {
      await expireInteraction(inter.id, row.id);
      throw interactionNotPending();
    }
    if (TERMINAL_RUN_STATES.includes(row.state as RunState)) {
      if (row.endReason === "attachment_failed") throw attachmentFailed();
      throw interactionNotPending();
    }
    if (inter.state !== "pending") throw notPending(inter.state);
    const options = Array.isArray(inter.options) ? (inter.options as string[]) : [];
    if (input.answer !== "cancel" && !options.includes(input.answer)) throw answerNotAccepted();
    const link = links.get(input.intern.id);
    if (!link) throw internUnreachable();
    const run = runs.get(row.id);
    // This process holds the intern's link, so every live run of it is in memory: a missing one is ending.
    if (!run || run.state === "done") throw interactionNotPending();
    if (run.link !== link) throw internUnreachable();
    if (run.attached) throw notPending("delivering");
    if (!(await repo.claimInteraction(inter.id, now))) throw notPending((await repo.findInteraction(inter.id))?.state ?? "void");
    if (run.attached || run.state !== "paused") {
      await repo.setInteractionState(inter.id, ["delivering"], "pending");
      throw notPending("delivering");
    }
    run.attached = true;
    const outcome = await link.deliverAnswer(run.id, inter.id, input.answer, config.startTimeoutMs);
    if (outcome === AnswerOutcome.ACCEPTED) {
      await repo.setInteractionState(inter.id, ["delivering"], "answered", input.answer);
      if (run.deadlineTimer) clearTimeout(run.deadlineTimer);
      run.deadlineTimer = undefined;
      run.interaction = undefined;
      if (run.state === "paused") {
        run.state = "streaming";
        await repo.transitionRun(run.id, ["paused"], "streaming");
      }
      return run;
    }
    run.attached = false;
    if (outcome === AnswerOutcome.NOT_PENDING) {
      await repo.setInteractionState(inter.id, ["delivering"], "void");
      await end(run, { on: "notPending" });
      throw interactionNotPending();
    }
    await repo.setInteractionState(inter.id, ["delivering"], "pending");
    if (run.interaction && run.interaction.deadlineAt.getTime() <= Date.now()) await expireInteraction(inter.id, run.id);
    if (outcome === AnswerOutcome.NOT_OFFERED) throw answerNotAccepted();
    if (outcome === "timeout") throw internTimeout();
    throw internUnreachable();
  }

  // ---------- what the relay calls ----------

  /** Records the pause (interaction with its deadline) before the question reaches the client. */
  async function pause(run: ActiveRun, q: Question): Promise<void> {
    const deadlineAt = new Date(Date.now() + config.interactionDeadlineMs);
    const id = q.interactionId || randomUUID();
    const args = questionArguments({ kind: q.kind, operation: q.operation, options: q.options, extra: q.arguments }, deadlineAt);
    await repo.createInteraction({
      id,
      runId: run.id,
      kind: q.kind || "permission",
      operation: q.operation ?? null,
      options: q.options,
      deadlineAt,
      arguments: args,
    });
    const extra: Parameters<InternRepository["transitionRun"]>[3] = { lastSeq: run.lastSeq };
    if (run.model) extra.model = run.model;
    await repo.transitionRun(run.id, ["streaming"], "paused", extra);
    if (run.state === "done") {
      // The client left (or the link broke) while the pause was being recorded: the run is over.
      await repo.setInteractionState(id, ["pending"], "void");
      return;
    }
    run.state = "paused";
    run.interaction = { id, deadlineAt, arguments: args };
    scheduleDeadline(run);
  }

  /** The client read the final chunk of a paused response: the run no longer follows it. */
  function detach(run: ActiveRun): void {
    run.attached = false;
    if (run.reportedModel) run.model = run.reportedModel;
    for (;;) {
      const item = run.take();
      if (!item) break;
      if (item.kind === "event" && isTerminal(item.event.case)) {
        finishDetached(run, item.event);
        return;
      }
      if (item.kind === "severed") {
        run.link = undefined;
        continue;
      }
      if (item.kind === "overflow") {
        later(() => end(run, { on: "overflow" }));
        return;
      }
      if (item.kind === "event") {
        // Keep non-terminal output for the continuation.
        run.push(item);
        break;
      }
    }
  }

  /** The client of a streaming (or not yet released) run went away: cancel it on the host now. */
  function clientGone(run: ActiveRun): void {
    if (run.state === "done" || !run.attached) return;
    log.info({ runId: run.id }, "client disconnected while streaming; cancelling the run");
    run.link?.cancelRun(run.id, CancelReason.CLIENT_DISCONNECTED);
    run.clearQueue();
    run.push({ kind: "aborted" });
    later(() => end(run, { on: "clientGone" }));
  }

  // ---------- links opening ----------

  /**
   * Reconciles a new link's Hello with the database: held & paused → stays paused on this link;
   * paused in the database but not held → the run ended; held but unknown here → cancel it.
   * Runs still marked streaming for this intern belong to a dead link and end as stream_severed.
   */
  async function reconcile(link: InternLink, hello: Hello): Promise<string[]> {
    const held = new Map(hello.heldRuns.map((h) => [h.runId, h]));
    const cancel: string[] = [];
    const rows = await repo.runsOfIntern(link.internId, ["streaming", "paused"]);
    const known = new Set<string>();
    for (const row of rows) {
      const inMemory = runs.get(row.id);
      if (inMemory && inMemory.link && inMemory.link !== link && !inMemory.link.closed) continue;
      const h = held.get(row.id);
      if (row.state === "paused" && h) {
        known.add(row.id);
        const pending = await repo.pendingInteractionOfRun(row.id);
        if (!pending || (h.pendingInteractionId && h.pendingInteractionId !== pending.id) || Number(h.lastSeq) > row.lastSeq) {
          // The host moved on (or sent output we never got): the pause cannot be resumed.
          cancel.push(row.id);
          if (inMemory) await end(inMemory, { on: "overflow" });
          else if (await repo.transitionRun(row.id, ["paused"], "failed", { endReason: "attachment_failed" })) {
            await repo.voidInteractionsOfRun(row.id);
            await repo.unlockSession(row.sessionId, row.id);
          }
          continue;
        }
        const run =
          inMemory ??
          new ActiveRun(row.id, row.internId, row.sessionId, row.sessionKey, row.approvalMode === "manual" ? "manual" : "self-drive");
        run.state = "paused";
        run.link = link;
        run.model = row.model ?? run.model;
        run.lastSeq = Math.max(run.lastSeq, row.lastSeq);
        run.interaction = { id: pending.id, deadlineAt: pending.deadlineAt, arguments: argumentsOf(pending) };
        runs.set(run.id, run);
        scheduleDeadline(run);
        continue;
      }
      // Not held (or streaming on a dead link): the run is over.
      const reason = row.state === "paused" ? "host_lost" : "stream_severed";
      if (inMemory) {
        if (inMemory.attached && inMemory.state !== "paused") inMemory.push({ kind: "severed" });
        else await end(inMemory, row.state === "paused" ? { on: "hostLost" } : { on: "severed" });
      } else if (await repo.transitionRun(row.id, ["streaming", "paused"], "ended", { endReason: reason })) {
        await repo.voidInteractionsOfRun(row.id);
        await repo.unlockSession(row.sessionId, row.id);
      }
    }
    for (const id of held.keys()) if (!known.has(id)) cancel.push(id);
    return [...new Set(cancel)];
  }

  // ---------- background sweep ----------

  async function sweep(): Promise<void> {
    if (sweeping || closed) return;
    sweeping = true;
    try {
      const now = new Date();
      for (const inter of await repo.expiredInteractions(now)) {
        await expireInteraction(inter.id, inter.runId);
      }
      await repo.releaseStaleDeliveries(new Date(now.getTime() - config.startTimeoutMs - 10_000));
    } catch (err) {
      if (!closed) log.error({ err }, "interaction sweep failed");
    } finally {
      sweeping = false;
    }
  }
  const sweeper = setInterval(() => later(sweep), sweepMs);
  sweeper.unref();

  return {
    /** This process holds the intern's live link. */
    holdsLink: (internId: string) => links.get(internId) !== undefined,
    startRun,
    answer,
    getSession,
    cancelSession,
    pause,
    detach,
    clientGone,
    finishRun,
    end,
    onRunEvent,
    onLinkClosed,
    reconcile,
    sweep,
    expireInteraction,
    /** Runs relayed by this process (diagnostics and tests). */
    activeRuns: () => [...runs.values()],
    close(): void {
      closed = true;
      clearInterval(sweeper);
      for (const run of runs.values()) if (run.deadlineTimer) clearTimeout(run.deadlineTimer);
    },
  };
}

export type RunManager = ReturnType<typeof createRunManager>;
