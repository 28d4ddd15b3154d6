/**
 * The intern run state machine (the description's "Intern run" table) over the database and the
 * live host links of this process, composed from one module per concern:
 *
 *   run-endings.ts    the transition table (cause → state, end reason, what the stream shows); pure
 *   run-lifecycle.ts  the one place a run's state changes, in memory and in the database (every
 *                     write of a run's row, its session's turn lock, its pause and answer); the
 *                     modules below decide when; run-rows.ts holds its writes of a run by its
 *                     row alone (turn lock, start, owner and lease, ends of runs not relayed here)
 *   run-admission.ts  starting a run: capacity, key share, the session's turn lock, StartRun
 *   run-answers.ts    the answer protocol: pause on a question, claim and deliver an answer
 *   run-deadlines.ts  question deadlines (timer and expiry)
 *   run-events.ts     what a link reports: run events, the link closing
 *   run-reconcile.ts  a new link's Hello against the database
 *   run-sessions.ts   reading a session, cancelling its run
 *   run-ownership.ts  when to renew the leases of live runs; ending runs no process owns
 *   run-sweep.ts      the background sweep of every core
 *   active-run.ts     a relayed run in memory (its event queue)
 *
 * Sessions, runs and interactions live in the database, so an answer may come on any request; each
 * race (two answers, answer vs deadline, two prompts for one session) is settled by a conditional
 * update. In memory we keep only what a live run needs: its event queue, the link it runs on and its
 * deadline timer. The per-session turn lock is InternSession.activeRunId.
 */
import type { Logger } from "pino";
import type { InternChatConfig } from "../../config.js";
import { CancelReason, type Question, type Usage } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { InternRepository } from "./intern-repository.js";
import type { LinkRegistry } from "./link-registry.js";
import type { Background } from "./background.js";
import type { InternCluster } from "./cluster.js";
import type { ActiveRun, RunItem } from "./active-run.js";
import { endingOf, type EndingCause, type RunEnding } from "./run-endings.js";
import { createRunLifecycle, type RunContext } from "./run-lifecycle.js";
import { createRunDeadlines } from "./run-deadlines.js";
import { createRunAdmission } from "./run-admission.js";
import { createRunAnswers } from "./run-answers.js";
import { createRunEvents } from "./run-events.js";
import { createRunReconcile } from "./run-reconcile.js";
import { createRunSessions } from "./run-sessions.js";
import { createRunSweep } from "./run-sweep.js";
import { createRunOwnership } from "./run-ownership.js";
import type { RunCredentials } from "./run-credentials.js";

export { ActiveRun, type RunItem } from "./active-run.js";
export { RUN_ENDINGS, causeOfEvent, endingOf, usageFromProto, type EndingCause, type RunEnding, type RunFinish } from "./run-endings.js";
export { MAX_BUFFERED_BYTES_PER_RUN } from "./run-events.js";
export type { StartRunInput } from "./run-admission.js";
export type { AnswerInput } from "./run-answers.js";

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
  /** How long a run's owner vouches for it in the database (default 30 s; renewed every third of it). */
  runLeaseMs?: number;
  /** The gateway address hosts reach; undefined: no model calls through Portico (docs/interns.md). */
  gatewayUrl?: () => string | undefined;
  credentials?: RunCredentials;
  /** Writes this process's queued generation records now (a run's usage is summed from them). */
  flushGenerations?: () => Promise<void>;
}

/** Default lease of a live run's owner: a run whose process died is ended by another core's sweep within about this. */
export const DEFAULT_RUN_LEASE_MS = 30_000;

/**
 * One client's reading of a run (one StreamChat response): what the relay may do to the run. Once the
 * reader is released (the run paused and the client got its question) the run outlives the client.
 */
export interface RunReader {
  readonly run: ActiveRun;
  /** The next item, or undefined after `idleMs` without one (time for a heartbeat). */
  next(idleMs: number): Promise<RunItem | undefined> | RunItem;
  /** The intern's usage for the turn. */
  usage(u: Usage): void;
  /** Records the pause before the question reaches the client; the ending when the run ended meanwhile. */
  pause(q: Question): Promise<RunEnding | undefined>;
  /** The client got the question: the run no longer follows it. */
  release(): void;
  /** Ends the run the way `cause` ends it; the ending to render. */
  end(cause: EndingCause): Promise<RunEnding>;
  /** The client went away (or the response ended): cancels the run unless it was released. */
  leave(): void;
}

export function createRunManager(deps: RunManagerDeps) {
  const { links, cluster } = deps;
  let closed = false;
  const stopping = new AbortController();
  const ctx: RunContext = {
    repo: deps.repo,
    links,
    cluster,
    config: deps.config,
    instanceId: deps.instanceId,
    log: deps.logger.child({ component: "intern-runs" }),
    later: (work) => deps.background.run(work),
    runs: new Map<string, ActiveRun>(),
    closed: () => closed,
    stopping: stopping.signal,
    unwrittenEnds: new Set<string>(),
    runLeaseMs: deps.runLeaseMs ?? DEFAULT_RUN_LEASE_MS,
    gatewayUrl: deps.gatewayUrl ?? (() => undefined),
    ...(deps.credentials ? { credentials: deps.credentials } : {}),
    ...(deps.flushGenerations ? { flushGenerations: deps.flushGenerations } : {}),
  };
  const { runs, later } = ctx;
  const lifecycle = createRunLifecycle(ctx);
  const deadlines = createRunDeadlines(ctx, lifecycle);
  const admission = createRunAdmission(ctx, lifecycle);
  const answers = createRunAnswers(ctx, lifecycle, deadlines);
  const events = createRunEvents(ctx, lifecycle);
  const reconciler = createRunReconcile(ctx, lifecycle, deadlines);
  const sessions = createRunSessions(ctx, lifecycle, deadlines, deps.brand);
  const ownership = createRunOwnership(ctx, lifecycle, deadlines);
  const sweeper = createRunSweep(ctx, deadlines, ownership);

  /**
   * Another process decided to cancel a run (its deadline passed there, or a caller cancelled it there)
   * whose link or stream may be here; that process has already recorded the end.
   */
  cluster.onCancel((internId, runId, reason) => {
    const run = runs.get(runId);
    if (run && run.internId === internId) {
      const link = run.link;
      later(() => lifecycle.endAndTell(run, reason === CancelReason.DEADLINE ? { on: "deadline" } : { on: "cancelled" }));
      link?.cancelRun(runId, reason);
      return;
    }
    links.get(internId)?.cancelRun(runId, reason);
  });

  function reader(run: ActiveRun): RunReader {
    // This client's reading of the run: once it is released, or another client reads the run, its leaving ends nothing.
    const reading = run.reading;
    return {
      run,
      next: (idleMs) => run.next(idleMs),
      usage: (u) => lifecycle.recordUsage(run, u),
      async pause(q) {
        return (await answers.pause(run, q)) ? undefined : endingOf({ on: "runEnded", deadline: false });
      },
      release: () => lifecycle.detach(run),
      end: (cause) => lifecycle.end(run, cause),
      leave: () => lifecycle.leave(run, reading),
    };
  }

  return {
    /** This process holds the intern's live link. */
    holdsLink: (internId: string) => links.get(internId) !== undefined,
    startRun: admission.startRun,
    answer: answers.answer,
    /** The relay's handle on a run it streams to one client. */
    reader,
    getSession: sessions.getSession,
    cancelSession: sessions.cancelSession,
    end: lifecycle.end,
    onRunEvent: events.onRunEvent,
    onLinkClosed: events.onLinkClosed,
    reconcile: reconciler.reconcile,
    sweep: sweeper.sweep,
    expireInteraction: deadlines.expireInteraction,
    /** Renews the leases of the runs this process relays now (tests; a timer does it every third of the lease). */
    renewLeases: ownership.renew,
    /** Runs relayed by this process (diagnostics and tests). */
    activeRuns: () => [...runs.values()],
    close(): void {
      closed = true;
      stopping.abort();
      sweeper.stop();
      ownership.stop();
      for (const run of runs.values()) lifecycle.clearDeadline(run);
    },
  };
}

export type RunManager = ReturnType<typeof createRunManager>;
