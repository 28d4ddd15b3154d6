/**
 * First-run step: the built-in intern (driven by the embedded host and the built-in agent) in the
 * bootstrap workspace. Idempotent; the host token is returned only when the intern is created, and
 * only its hash is stored.
 */
import type { Db } from "../../db/client.js";
import type { BootstrapExtension } from "../identity/bootstrap.js";
import { createInternRepository } from "./intern-repository.js";

export const BUILTIN_INTERN_NAME = "builtin";

export function builtinInternExtension(name = BUILTIN_INTERN_NAME): BootstrapExtension {
  return async (db: Db, result) => {
    const repo = createInternRepository(db);
    const existing = await repo.findInternByName(result.workspace_id, name);
    if (existing) {
      if (existing.hostTokenHash) return { intern_id: existing.id };
      // The token was revoked: issue a new one so the embedded host can attach again.
      const token = await repo.revokeHostToken(existing.id, true);
      return { intern_id: existing.id, intern_host_token: token };
    }
    const { intern, hostToken } = await repo.createIntern({ workspaceId: result.workspace_id, name });
    return { intern_id: intern.id, intern_host_token: hostToken };
  };
}
