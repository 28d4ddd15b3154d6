/**
 * The runs of the intern host, by id: a new run's record, which runs are live or paused (the capacity
 * the host announces), and dropping a run the link will not take any more.
 */
import { EscalationLedger } from "./escalation.js";
import { RunEventQueue } from "./event-queue.js";
import type { InternHostLimits } from "./options.js";
import { QuestionQueue } from "./questions.js";
import type { Run, Session } from "./run.js";

export interface HostCapacity {
  runningRuns: number;
  pausedRuns: number;
  busy: boolean;
}

export function createRunTable(limits: InternHostLimits) {
  const runs = new Map<string, Run>();

  /** A new run record (not yet in the table). `deadlineMs` 0: the host's default question deadline. */
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

  /** The session's run unless it is done. */
  function activeRunOf(session: Session): Run | undefined {
    return session.run && session.run.state !== "done" ? session.run : undefined;
  }

  function activeRuns(): Run[] {
    return [...runs.values()].filter((r) => r.state !== "done");
  }

  /** Live runs waiting for the answer to a question. */
  function pausedCount(): number {
    return activeRuns().filter((r) => r.questions.presented !== undefined).length;
  }

  function capacity(): HostCapacity {
    const running = activeRuns().length;
    const paused = pausedCount();
    return { runningRuns: running, pausedRuns: paused, busy: running >= limits.maxConcurrentRuns || paused >= limits.maxPausedRuns };
  }

  /** Nothing more of the run goes to the link: its queued events are dropped, and a done run leaves the table. */
  function dropRun(run: Run): void {
    run.detached = true;
    run.held = false;
    if (run.heldTimer) clearTimeout(run.heldTimer);
    run.events.clear();
    if (run.state === "done") runs.delete(run.id);
  }

  return {
    get: (id: string) => runs.get(id),
    has: (id: string) => runs.has(id),
    add: (run: Run) => void runs.set(run.id, run),
    delete: (id: string) => void runs.delete(id),
    /** Every run in the table (a copy: callers may change the table while they go through it). */
    all: () => [...runs.values()],
    newRun,
    activeRunOf,
    pausedCount,
    capacity,
    dropRun,
  };
}

export type RunTable = ReturnType<typeof createRunTable>;
