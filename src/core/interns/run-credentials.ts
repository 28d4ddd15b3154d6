/**
 * Intern run credentials (docs/interns.md, "Model calls through Portico"): when an intern's model calls go
 * through Portico, the core mints one short-lived token per run and hands it to the host in StartRun.gateway.
 * The agent sends it to the model endpoints (chat completions, Messages, count_tokens, Responses, embeddings,
 * the Gemini dialect); the auth interceptor (../auth.ts) accepts it there only, as the API key that started
 * the run (billed and limited as that key), with the intern's model in place of the one the agent names.
 *
 * Stored in the database every core shares (InternRunCredential; only the token's SHA-256), so any instance
 * authenticates it and sees its revocation. It is refused once:
 * - revoked: the run's end is written (intern-repository.ts `transitionRun`, the one write of every run end:
 *   the run ended, failed, was cancelled, its deadline passed, its owner or host was lost), or
 * - its run is no longer streaming or paused (checked on every call, so an end written by any path counts), or
 * - past `expiresAt`: the run's start plus PORTICO_INTERN_RUN_CREDENTIAL_TTL_MS (default 4 hours).
 */
import type { Db } from "../../db/client.js";
import { generateSecret, hashSecret, RUN_TOKEN_PREFIX } from "../identity/keys.js";

/** Default lifetime of a run credential (PORTICO_INTERN_RUN_CREDENTIAL_TTL_MS). */
export const DEFAULT_RUN_CREDENTIAL_TTL_MS = 4 * 60 * 60 * 1000;

/** What a run credential is scoped to. */
export interface RunScope {
  runId: string;
  internId: string;
  /** InternSession.id */
  sessionId: string;
  /** The caller-visible session_id. */
  sessionKey: string;
  organizationId: string;
  workspaceId: string;
  keyId: string;
  keyHash: string;
  /** The intern's model (`<provider>/<model>` or `@preset/<slug>`): every call made with the credential uses it. */
  model: string;
}

export type RunCredentialCheck =
  | { ok: true; scope: RunScope; expiresAt: Date }
  | { ok: false; why: "unknown" | "revoked" | "expired" };

/** Whether a presented secret is shaped like a run credential (the prefix decides; the store decides the rest). */
export function isRunToken(token: string): boolean {
  return token.startsWith(RUN_TOKEN_PREFIX);
}

const LIVE_RUN_STATES = ["streaming", "paused"];

export function createRunCredentials(db: Db, opts: { ttlMs?: number } = {}) {
  const ttlMs = opts.ttlMs ?? DEFAULT_RUN_CREDENTIAL_TTL_MS;
  return {
    ttlMs,

    /** A new credential for the run; the token is returned once (only its hash is stored). */
    async mint(scope: RunScope, now = new Date()): Promise<{ token: string; expiresAt: Date }> {
      const token = generateSecret(RUN_TOKEN_PREFIX);
      const expiresAt = new Date(now.getTime() + ttlMs);
      await db.internRunCredential.create({ data: { ...scope, tokenHash: hashSecret(token), expiresAt } });
      return { token, expiresAt };
    },

    /** Whether `token` is a live credential, and what it is scoped to. */
    async check(token: string, now = new Date()): Promise<RunCredentialCheck> {
      const row = await db.internRunCredential.findUnique({ where: { tokenHash: hashSecret(token) } });
      if (!row) return { ok: false, why: "unknown" };
      if (row.revokedAt) return { ok: false, why: "revoked" };
      if (row.expiresAt.getTime() <= now.getTime()) return { ok: false, why: "expired" };
      const run = await db.internRun.findUnique({ where: { id: row.runId }, select: { state: true } });
      if (!run || !LIVE_RUN_STATES.includes(run.state)) return { ok: false, why: "revoked" };
      const scope: RunScope = {
        runId: row.runId,
        internId: row.internId,
        sessionId: row.sessionId,
        sessionKey: row.sessionKey,
        organizationId: row.organizationId,
        workspaceId: row.workspaceId,
        keyId: row.keyId,
        keyHash: row.keyHash,
        model: row.model,
      };
      return { ok: true, scope, expiresAt: row.expiresAt };
    },

    /** Revokes the run's credential (idempotent). */
    async revokeRun(runId: string, now = new Date()): Promise<void> {
      await db.internRunCredential.updateMany({ where: { runId, revokedAt: null }, data: { revokedAt: now } });
    },

    /** Deletes credentials that expired more than `olderThanMs` ago (the run sweep). */
    async prune(now = new Date(), olderThanMs = 24 * 60 * 60 * 1000): Promise<number> {
      const res = await db.internRunCredential.deleteMany({ where: { expiresAt: { lt: new Date(now.getTime() - olderThanMs) } } });
      return res.count;
    },
  };
}

export type RunCredentials = ReturnType<typeof createRunCredentials>;
