/**
 * The run lifecycle's writes of a run by its database row alone: the session's turn lock, the row of a
 * run being admitted, its owner and lease, and the end of a run this process does not relay (another
 * core's, or one whose process died). Each is the conditional update (or transaction) that settles a
 * race with another request or core process. Reached only through the lifecycle (run-lifecycle.ts).
 */
import type { RunState } from "./intern-repository.js";
import { endingOf, type EndingCause } from "./run-endings.js";
import type { RunContext } from "./run-lifecycle.js";

/** A run known by its database row only (not relayed by this process). */
export interface RunRow {
  id: string;
  sessionId: string;
}

export function createRunRows(ctx: RunContext) {
  const { repo } = ctx;

  /** The lease a run gets now (at creation, renewal, adoption). */
  const leaseUntil = () => new Date(Date.now() + ctx.runLeaseMs);

  /** Takes the session's turn lock for the new run `runId`; false when another run holds it. */
  async function lockTurn(sessionId: string, runId: string): Promise<boolean> {
    return repo.lockSession(sessionId, runId);
  }

  /** A brand-new session (a freshly minted key) whose turn lock the new run `runId` holds from the start. */
  async function newLockedSession(internId: string, sessionKey: string, runId: string) {
    return repo.createLockedSession(internId, sessionKey, runId);
  }

  /**
   * Writes the row of a run admitted here (streaming, owned by this process); when that fails the
   * session's turn lock the admission took for it is released.
   */
  async function recordStart(input: { id: string; internId: string; sessionId: string; sessionKey: string; approvalMode: string }): Promise<void> {
    try {
      await repo.createRun({ ...input, owner: ctx.instanceId, leaseUntil: leaseUntil() });
    } catch (err) {
      await repo.unlockSession(input.sessionId, input.id);
      throw err;
    }
  }

  /** A run whose row is written but that never reached the host (it is not in memory): ends it, best effort. */
  async function endUnsent(row: RunRow, cause: EndingCause): Promise<void> {
    const ending = endingOf(cause);
    await repo.transitionRun(row.id, ["streaming"], ending.state, { endReason: ending.endReason }).catch(() => undefined);
    await repo.unlockSession(row.sessionId, row.id).catch(() => undefined);
  }

  /** Releases a session's turn lock still held by a run that already ended (its process ended without releasing it). */
  async function releaseStaleLock(sessionId: string, runId: string): Promise<void> {
    await repo.unlockSession(sessionId, runId);
  }

  /** This process relays the run now (adopted after a reconnect): its lease is ours to renew. */
  async function claim(runId: string): Promise<void> {
    await repo.claimRun(runId, ctx.instanceId, leaseUntil());
  }

  /** Renews this process's lease of the live runs `ids` it still owns. */
  async function renewLeases(ids: string[]): Promise<void> {
    await repo.renewRunLeases(ctx.instanceId, ids, leaseUntil());
  }

  /**
   * Ends a run known by its row only, if it is still in one of `from` (one winner among concurrent
   * writers): its questions are voided (unless `voidQuestions` is false: the caller settled its one
   * question already) and its session's turn lock released. False when another writer ended it first.
   */
  async function endRow(row: RunRow, from: RunState[], cause: EndingCause, opts: { voidQuestions?: boolean } = {}): Promise<boolean> {
    const ending = endingOf(cause);
    if (!(await repo.transitionRun(row.id, from, ending.state, { endReason: ending.endReason }))) return false;
    if (opts.voidQuestions !== false) await repo.voidInteractionsOfRun(row.id);
    await repo.unlockSession(row.sessionId, row.id);
    return true;
  }

  return { lockTurn, newLockedSession, recordStart, endUnsent, releaseStaleLock, claim, renewLeases, endRow };
}
