import type { Config } from "../config.js";
import { ConnectError } from "@connectrpc/connect";
import { openDatabase, type DatabaseHandle, type Db } from "../db/client.js";
import { createKeysService, type KeysService } from "../core/keys/keys-service.js";
import { createWorkspacesService, type WorkspacesService } from "../core/workspaces/workspaces-service.js";
import { createSpendStore } from "../core/spend/spend-store.js";
import { errorDetailOf } from "../lib/service-error.js";
import { createInvalidationBus } from "../lib/invalidation.js";
import { ALL_KEYS, AUTH_TOPIC } from "../core/identity/key-cache.js";
import { createInternAdmin, type InternAdmin } from "../core/interns/intern-admin.js";

/** Opens (and migrates) the configured database for one command, closing it afterwards. */
export async function withDatabase<T>(cfg: Config, fn: (handle: DatabaseHandle) => Promise<T>): Promise<T> {
  const handle = await openDatabase({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir, migrate: true });
  try {
    return await fn(handle);
  } finally {
    await handle.close();
  }
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export class CliError extends Error {}

export interface AdminServices {
  db: Db;
  workspaces: WorkspacesService;
  keys: KeysService;
  interns: InternAdmin;
}

/**
 * Runs an admin command through the same domain services as the management API (so it is checked
 * and audited the same way, with actor "cli"); a refusal becomes a one-line CLI error.
 */
export async function withServices<T>(cfg: Config, fn: (services: AdminServices) => Promise<T>): Promise<T> {
  return withDatabase(cfg, async (h) => {
    // Changes reach the caches of running processes through Redis when it is configured; otherwise
    // their time bound (PORTICO_AUTH_CACHE_TTL_MS, at most 1 s) makes a revocation take effect.
    const bus = createInvalidationBus(cfg);
    const standing = () => bus.publish(AUTH_TOPIC, ALL_KEYS);
    // Only setLimit is used here (reservations are the core's), so the expiry bound does not matter.
    const spend = createSpendStore({ db: h.db, reservationTtlMs: 300_000 });
    const workspaces = createWorkspacesService(h.db, { onMembershipChanged: standing, onWorkspaceDeleted: standing, onLimitsChanged: standing, spend });
    const keys = createKeysService({ db: h.db, workspaces, spend, onKeyChanged: (hash) => bus.publish(AUTH_TOPIC, hash) });
    try {
      return await fn({ db: h.db, workspaces, keys, interns: createInternAdmin({ db: h.db }) });
    } catch (err) {
      if (err instanceof ConnectError) {
        const field = errorDetailOf(err)?.field;
        throw new CliError(field ? `${err.rawMessage} (${field})` : err.rawMessage);
      }
      throw err;
    } finally {
      await bus.close();
    }
  });
}
