/**
 * The one place a run's state changes: in memory (ActiveRun: starting → streaming ⇄ paused → done,
 * read by a client or not, usage, the pending question, its deadline timer) and in the database (the
 * run's row: its state, end reason, usage, model and last sequence; its owner and lease; its session's
 * turn lock; the question it pauses on, created with the pause and answered with the resume). Admission,
 * the answer protocol, link events, reconciliation, deadlines, ownership and the sweep decide *when*; the
 * functions here do the write, each with the conditional update (the expected state in the WHERE clause)
 * that settles a race with another request or core process.
 *
 * The writes of a run by its row alone (the turn lock, the row of a run being admitted, owner and lease,
 * the end of a run this process does not relay) are in run-rows.ts, part of this lifecycle's surface.
 *
 * The question's own protocol (claimed for delivery, returned to pending, expired, voided when the host
 * no longer has it) is the answer protocol's and the deadlines' (run-answers.ts, run-deadlines.ts).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { InternChatConfig } from "../../config.js";
import { CancelReason, type RunEvent, type Usage } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { InternRepository, RunState } from "./intern-repository.js";
import type { InternLink, LinkRegistry } from "./link-registry.js";
import type { InternCluster } from "./cluster.js";
import type { ActiveRun } from "./active-run.js";
import type { RunCredentials } from "./run-credentials.js";
import { causeOfEvent, endingOf, usageFromProto, type EndingCause, type RunEnding } from "./run-endings.js";
import { createRunRows } from "./run-rows.js";
import type { JsonObject } from "@bufbuild/protobuf";

/** What every part of the run manager shares: the dependencies and the runs this process relays. */
export interface RunContext {
  repo: InternRepository;
  links: LinkRegistry;
  cluster: InternCluster;
  config: InternChatConfig;
  instanceId: string;
  log: Logger;
  /** Work started off the request path (tracked so close can wait for it). */
  later(work: () => Promise<unknown>): void;
  /** Runs relayed by this process (streaming, or paused on a link of this process), by id. */
  runs: Map<string, ActiveRun>;
  /** True once the manager is closing. */
  closed(): boolean;
  /** Aborted when the manager closes (ends waits such as the end-write backoff). */
  stopping: AbortSignal;
  /** Runs whose end is decided here but not yet written (the database failed): the write is retried. */
  unwrittenEnds: Set<string>;
  /** How long a run's owner vouches for it in the database (renewed while the run is live here). */
  runLeaseMs: number;
  /** The gateway address hosts reach (config, else `portico serve`'s own listener); undefined: no model calls through Portico. */
  gatewayUrl(): string | undefined;
  /** Run model credentials (run-credentials.ts); absent in unit tests that do not need them. */
  credentials?: RunCredentials;
  /** Writes this process's queued generation records now (before a run's usage is summed from them). */
  flushGenerations?: () => Promise<void>;
}

/** Backoff of a run's end write that failed: 100 ms doubling to 5 s, until written or the process stops. */
const END_RETRY_MIN_MS = 100;
const END_RETRY_MAX_MS = 5_000;
/** How long the relay waits for a run's end to be written before it sends the stream's last chunk anyway. */
const END_WRITE_WAIT_MS = 2_000;
/** How long a run's end waits for the sum of its generations (docs/interns.md) before it keeps the intern's own figure. */
const USAGE_SUM_WAIT_MS = 2_000;

/** The question a run pauses on, as recorded with the pause. */
export interface PauseRecord {
  id: string;
  kind: string;
  operation: string | null;
  options: string[];
  deadlineAt: Date;
  arguments: JsonObject;
}

export function createRunLifecycle(ctx: RunContext) {
  const { repo, log, later, runs } = ctx;
  const rows = createRunRows(ctx);

  /**
   * Ends a run in memory at once (so no second path ends it) and then in the database. A write that
   * fails (the database is unreachable or locked) is retried in the background with backoff until it is
   * written or the process stops, so the run never stays streaming and its session never stays locked
   * while this process lives; meanwhile the run's lease is still renewed (see run-ownership.ts), and once
   * this process is gone another core's sweep ends it.
   */
  async function finishRun(run: ActiveRun, state: RunState, endReason: string | undefined): Promise<void> {
    if (run.state === "done") return;
    const hadInteraction = run.interaction !== undefined;
    run.state = "done";
    run.attached = false;
    clearDeadline(run);
    run.interaction = undefined;
    runs.delete(run.id);
    const extra: Parameters<InternRepository["transitionRun"]>[3] = { usage: run.usage ?? null, lastSeq: run.lastSeq };
    if (endReason !== undefined) extra.endReason = endReason;
    if (run.model) extra.model = run.model;
    // Each statement is idempotent: a retry after a partial write finishes it.
    const write = async () => {
      await repo.transitionRun(run.id, ["streaming", "paused"], state, extra);
      if (hadInteraction) await repo.voidInteractionsOfRun(run.id);
      await repo.unlockSession(run.sessionRowId, run.id);
    };
    ctx.unwrittenEnds.add(run.id);
    const written = writeEnd(run.id, state, write).finally(() => ctx.unwrittenEnds.delete(run.id));
    later(() => written);
    // The stream's last chunk follows the write (a client's next turn then finds the session free), but a
    // failing database holds it back at most END_WRITE_WAIT_MS: the write goes on in the background.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([written, new Promise<void>((resolve) => (timer = setTimeout(resolve, END_WRITE_WAIT_MS)))]);
    clearTimeout(timer);
  }

  /** Writes a run's end, retrying with backoff until it is written or the process stops. */
  async function writeEnd(runId: string, state: RunState, write: () => Promise<void>): Promise<void> {
    let delay = END_RETRY_MIN_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        await write();
        if (attempt > 1) log.info({ runId, attempts: attempt }, "recorded the end of a run after the database failed");
        return;
      } catch (err) {
        if (ctx.closed()) {
          log.error({ err, runId }, "could not record the end of a run before the process stopped; another core's sweep ends it once its lease passes");
          return;
        }
        if (attempt === 1) log.warn({ err, runId, state }, "could not record the end of a run; retrying until it is written");
        else log.debug({ err: { message: (err as Error).message }, runId, attempt }, "the end of a run is still not written");
      }
      try {
        await sleep(delay, undefined, { signal: ctx.stopping });
      } catch {
        log.error({ runId }, "could not record the end of a run before the process stopped; another core's sweep ends it once its lease passes");
        return;
      }
      delay = Math.min(END_RETRY_MAX_MS, delay * 2);
    }
  }

  /** Ends a run the way `cause` ends it per the transition table; returns the ending for the relay to render. */
  async function end(run: ActiveRun, cause: EndingCause): Promise<RunEnding> {
    const ending = endingOf(cause);
    if (run.throughGateway && run.state !== "done") await sumGenerations(run);
    await finishRun(run, ending.state, ending.endReason);
    return ending;
  }

  /**
   * A run whose model calls went through Portico: its usage is the sum of its generations (this process's queued
   * records written first), in place of what the intern reported; unchanged when it has none or the sum is late.
   */
  async function sumGenerations(run: ActiveRun): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const summed = await Promise.race([
        (async () => {
          await ctx.flushGenerations?.();
          return repo.generationUsageOfRun(run.id);
        })(),
        new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), USAGE_SUM_WAIT_MS))),
      ]);
      if (summed) run.usage = summed;
    } catch (err) {
      log.warn({ err, runId: run.id }, "could not sum a run's generations; keeping the usage the intern reported");
    } finally {
      clearTimeout(timer);
    }
  }

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

  /** A terminal event for a run no client is reading (it paused, then the intern ended it). */
  function finishDetached(run: ActiveRun, e: RunEvent["event"]): void {
    const cause = causeOfEvent(e);
    if (cause) later(() => end(run, cause));
  }

  /** The run buffered more than the core retains: cancel it on the host and fail it. */
  function overflow(run: ActiveRun): void {
    log.warn({ runId: run.id }, "run buffered more output than the core retains; failing it");
    run.clearQueue();
    run.link?.cancelRun(run.id, CancelReason.OPERATOR);
    if (run.attached) run.push({ kind: "overflow" });
    else later(() => end(run, { on: "overflow" }));
  }

  // ---------- starting ----------

  /** The run admitted here is relayed by this process from now on, read by the client that started it. */
  function admitted(run: ActiveRun, at: { link: InternLink; model: string; callerKey: string | undefined; throughGateway: boolean }): void {
    run.throughGateway = at.throughGateway;
    run.callerKey = at.callerKey;
    run.link = at.link;
    run.model = at.model;
    run.attached = true;
    run.reading++;
    runs.set(run.id, run);
  }

  /** The host started the run (or sent output, which means it did). */
  function started(run: ActiveRun): void {
    run.state = "streaming";
  }

  /** The link delivered the run's event number `seq` (in order; duplicates are dropped by the caller). */
  function sequenced(run: ActiveRun, seq: number): void {
    run.lastSeq = seq;
  }

  // ---------- pause and answer ----------

  /**
   * Records the pause (the question with its deadline, then the run paused) before the question reaches
   * the client; false when the run ended meanwhile (the client left or the link broke while the pause
   * was recorded): the question is voided. The caller arms the deadline.
   */
  async function recordPause(run: ActiveRun, q: PauseRecord): Promise<boolean> {
    await repo.createInteraction({
      id: q.id,
      runId: run.id,
      kind: q.kind,
      operation: q.operation,
      options: q.options,
      deadlineAt: q.deadlineAt,
      arguments: q.arguments,
    });
    const extra: Parameters<InternRepository["transitionRun"]>[3] = { lastSeq: run.lastSeq };
    if (run.model) extra.model = run.model;
    await repo.transitionRun(run.id, ["streaming"], "paused", extra);
    if (run.state === "done") {
      // The client left (or the link broke) while the pause was being recorded: the run is over.
      await repo.setInteractionState(q.id, ["pending"], "void");
      return false;
    }
    run.state = "paused";
    run.interaction = { id: q.id, deadlineAt: q.deadlineAt, arguments: q.arguments };
    return true;
  }

  /**
   * The host accepted the answer being delivered: the question is answered and the paused run streams
   * again, read by the answering client.
   */
  async function answered(run: ActiveRun, interactionId: string, answer: string): Promise<void> {
    await repo.setInteractionState(interactionId, ["delivering"], "answered", answer);
    const wasPaused = run.state === "paused";
    clearDeadline(run);
    run.interaction = undefined;
    if (run.state === "paused") run.state = "streaming";
    if (wasPaused) await repo.transitionRun(run.id, ["paused"], "streaming");
  }

  /** Arms the deadline of the question the run waits for (replacing any earlier timer); `expire` fires at it. */
  function armDeadline(run: ActiveRun, expire: (interactionId: string) => void): void {
    clearDeadline(run);
    const inter = run.interaction;
    if (!inter) return;
    run.deadlineTimer = setTimeout(() => expire(inter.id), Math.max(0, inter.deadlineAt.getTime() - Date.now()));
    run.deadlineTimer.unref();
  }

  // ---------- ownership ----------

  /** A new link holds the paused run (after a reconnect). */
  function adoptPaused(
    run: ActiveRun,
    link: InternLink,
    row: { model: string | null; lastSeq: number },
    interaction: NonNullable<ActiveRun["interaction"]>,
    throughGateway: boolean,
  ): void {
    // A run adopted here may have had a model credential: its usage is summed from its generations at its end.
    if (throughGateway) run.throughGateway = true;
    run.state = "paused";
    run.link = link;
    run.model = row.model ?? run.model;
    run.lastSeq = Math.max(run.lastSeq, row.lastSeq);
    run.interaction = interaction;
    runs.set(run.id, run);
  }

  // ---------- who reads the run ----------

  /** A client starts reading the run (an answer being delivered); false when one already is. */
  function attach(run: ActiveRun): boolean {
    if (run.attached) return false;
    run.attached = true;
    run.reading++;
    return true;
  }

  /** Nobody reads the run any more (an answer that was not accepted). */
  function unattach(run: ActiveRun): void {
    run.attached = false;
  }

  /** The intern reports its model: the next response names it (this one too when nobody reads it yet). */
  function modelReported(run: ActiveRun, model: string): void {
    run.reportedModel = model;
    if (!run.attached) run.model = model;
  }

  /** A paused run's link closed: it is held across a short reconnect (the deadline still applies). */
  function linkLost(run: ActiveRun): void {
    run.link = undefined;
  }

  /** The usage the intern reported for the turn (shown in the final chunk, recorded with the end). */
  function recordUsage(run: ActiveRun, u: Usage): void {
    run.usage = usageFromProto(u);
  }

  /** The client read the final chunk of a paused response: the run no longer follows it. */
  function detach(run: ActiveRun): void {
    run.attached = false;
    if (run.reportedModel) run.model = run.reportedModel;
    for (;;) {
      const item = run.take();
      if (!item) break;
      if (item.kind === "event" && causeOfEvent(item.event)) {
        finishDetached(run, item.event);
        return;
      }
      if (item.kind === "severed") {
        linkLost(run);
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

  /**
   * The client of reading number `reading` (run.reading when it started) went away or its response
   * ended: the run is cancelled unless that client was released (it got the question, so the run no
   * longer follows it) or another client reads the run now.
   */
  function leave(run: ActiveRun, reading: number): void {
    if (run.reading === reading) clientGone(run);
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

  function clearDeadline(run: ActiveRun): void {
    if (run.deadlineTimer) clearTimeout(run.deadlineTimer);
    run.deadlineTimer = undefined;
  }

  return {
    // by the run's row alone (run-rows.ts): the turn lock, the row's start, owner and lease, an end
    ...rows,
    // starting
    admitted,
    started,
    sequenced,
    // pause and answer
    recordPause,
    answered,
    armDeadline,
    // ownership
    adoptPaused,
    // ending
    finishRun,
    end,
    endAndTell,
    finishDetached,
    overflow,
    // who reads the run, what it reports
    attach,
    unattach,
    detach,
    leave,
    recordUsage,
    modelReported,
    linkLost,
    clientGone,
    clearDeadline,
  };
}

export type RunLifecycle = ReturnType<typeof createRunLifecycle>;
