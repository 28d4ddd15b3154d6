/**
 * The background sweep every core runs: questions whose deadline passed (whichever process set them)
 * answers stuck in delivery because the process delivering them died, and streaming runs whose owner
 * is gone (run-ownership.ts); and, every 10 minutes, run credentials that expired a day ago (run-credentials.ts).
 */
import type { RunContext } from "./run-lifecycle.js";
import type { RunDeadlines } from "./run-deadlines.js";
import type { RunOwnership } from "./run-ownership.js";

/** How often a core deletes run credentials that expired more than a day ago. */
const CREDENTIAL_PRUNE_EVERY_MS = 10 * 60 * 1000;

export function createRunSweep(ctx: RunContext, deadlines: RunDeadlines, ownership: RunOwnership) {
  const { repo, config, log, later } = ctx;
  const sweepMs = Math.max(50, Math.min(5_000, Math.floor(config.interactionDeadlineMs / 4)));
  let sweeping = false;
  let lastPrune = 0;

  async function sweep(): Promise<void> {
    if (sweeping || ctx.closed()) return;
    sweeping = true;
    try {
      const now = new Date();
      for (const inter of await repo.expiredInteractions(now)) {
        await deadlines.expireInteraction(inter.id, inter.runId);
      }
      await repo.releaseStaleDeliveries(new Date(now.getTime() - config.startTimeoutMs - 10_000));
      await ownership.endOwnerless(now);
      if (ctx.credentials && now.getTime() - lastPrune >= CREDENTIAL_PRUNE_EVERY_MS) {
        lastPrune = now.getTime();
        await ctx.credentials.prune(now);
      }
    } catch (err) {
      if (!ctx.closed()) log.error({ err }, "interaction sweep failed");
    } finally {
      sweeping = false;
    }
  }
  const sweeper = setInterval(() => later(sweep), sweepMs);
  sweeper.unref();

  return {
    sweep,
    stop(): void {
      clearInterval(sweeper);
    },
  };
}
