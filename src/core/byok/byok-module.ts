/**
 * Composition of the BYOK domain for the core: loads the master keyring from configuration, checks
 * it against the database (refusing a wrong key), and builds the Connect handler.
 */
import type { Logger } from "pino";
import type { Config } from "../../config.js";
import type { DatabaseHandle } from "../../db/client.js";
import { createByokHandler } from "./byok-handler.js";
import { createByokRepository } from "./byok-repository.js";
import { createByokService } from "./byok-service.js";
import { createCredentialKeyAccess, type CredentialKeyAccess } from "./credential-use.js";
import { loadKeyring, type Keyring } from "./keyring.js";
import { verifyKeyring } from "./keyring-store.js";
import { createAuditRecorder } from "../audit/audit-log.js";
import { ProviderRegistry } from "../chat/providers/index.js";

/** The providers a registry can route to, as the BYOK rules ask for them (the catalog module's provider list). */
export { servedBy } from "../catalog/providers.js";
import { servedBy } from "../catalog/providers.js";

export interface ByokDomain {
  keyring: Keyring;
  handler: ReturnType<typeof createByokHandler>;
  /** For the code that puts credentials to use (provider calls); no public operation uses it. */
  keyAccess: CredentialKeyAccess;
}

/** Throws KeyringError when the master key is missing (production), malformed or wrong. */
export async function createByokDomain(opts: {
  database: DatabaseHandle;
  config: Config;
  logger: Logger;
  /** The providers requests can be routed to (BYOK credentials may name only these); default: from `config`. */
  servesProvider?: (slug: string) => boolean;
  /** Called after a credential was created, changed or deleted (committed), e.g. to drop cached keys. */
  onChanged?: () => void | Promise<void>;
}): Promise<ByokDomain> {
  const { database, config, logger } = opts;
  const log = logger.child({ component: "byok" });
  const onWarning = (message: string) => log.warn(message);
  const keyring = loadKeyring({
    masterKey: config.byok.masterKey,
    masterKeyFile: config.byok.masterKeyFile,
    dataDir: config.dataDir,
    production: config.production,
    onWarning,
  });
  if (keyring.source.kind === "file" && keyring.source.created) {
    log.warn({ path: keyring.source.path }, "created a new BYOK master key file (development default); back it up");
  }
  await verifyKeyring(database.db, keyring, { production: config.production, onWarning });
  const service = createByokService({
    repo: createByokRepository(database.db, database.provider),
    keyring,
    servesProvider: opts.servesProvider ?? servedBy(new ProviderRegistry(config.providers)),
    audit: (() => {
      const record = createAuditRecorder(database.db);
      return async (caller, entry) => {
        await record(caller, entry);
        await opts.onChanged?.();
      };
    })(),
  });
  return {
    keyring,
    handler: createByokHandler({ service }),
    keyAccess: createCredentialKeyAccess({ db: database.db, keyring }),
  };
}
