/**
 * The plan stage's reader of account-wide routing settings (src/core/routing-settings/routing-settings.ts), on a
 * real database: while an entry is fresh no query is made (a change written behind its back is not seen), a
 * bus message drops it at once, and without one the entry ends after its TTL.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshPostgres, freshSqlite } from "../../helpers/db.js";
import type { DatabaseHandle } from "../../../src/db/client.js";
import { createLocalInvalidationBus } from "../../../src/lib/invalidation.js";
import { createRoutingSettingsCache, createRoutingSettingsService, ROUTING_SETTINGS_TOPIC } from "../../../src/core/routing-settings/routing-settings.js";
import { cliActor } from "../../../src/core/audit/audit-log.js";
import { waitFor } from "../../helpers/wait.js";

describe.each(["sqlite", "postgresql"] as const)("routing settings cache (%s)", (provider) => {
  let database: DatabaseHandle;
  let org: string;
  let ws: string;
  beforeAll(async () => {
    database = provider === "sqlite" ? await freshSqlite() : await freshPostgres();
    org = (await database.db.organization.create({ data: { name: "o" } })).id;
    ws = (await database.db.workspace.create({ data: { organizationId: org, name: "w", slug: "w", isDefault: true } })).id;
  });
  afterAll(async () => database?.close());

  const names = (fs: readonly { field: string }[]) => fs.map((f) => f.field);

  it("no query while fresh; the bus drops the entry at once; the organization's filters come before the workspace's", async () => {
    const bus = createLocalInvalidationBus();
    const service = createRoutingSettingsService({ db: database.db, providerSlug: (n) => (["groq", "together"].includes(n) ? n : undefined) });
    const cache = createRoutingSettingsCache({ db: database.db, ttlMs: 3_600_000, bus });
    const caller = { organizationId: org, workspaceId: ws };
    expect(await cache.filtersFor(caller)).toEqual([]);
    // Written without telling the bus: the fresh entry is what the plan stage keeps reading.
    await service.update(cliActor(org), org, "", { ignoredProviders: ["groq"], zdr: true });
    await service.update(cliActor(org), org, ws, { allowedProviders: ["together"] });
    expect(await cache.filtersFor(caller)).toEqual([]);
    await bus.publish(ROUTING_SETTINGS_TOPIC, org);
    expect(names(await cache.filtersFor(caller))).toEqual([
      "organization.routing_settings.ignored_providers",
      "organization.routing_settings.zdr",
      "workspace.routing_settings.allowed_providers",
    ]);
    // Another workspace of the organization sees only the organization's settings.
    expect(names(await cache.filtersFor({ organizationId: org, workspaceId: "other" }))).toEqual([
      "organization.routing_settings.ignored_providers",
      "organization.routing_settings.zdr",
    ]);
    // Both changes were audited in their transactions.
    const events = await database.db.auditEvent.findMany({ where: { organizationId: org, action: "routing_settings.update" } });
    expect(events.map((e) => e.targetType).sort()).toEqual(["organization", "workspace"]);
  });

  it("without a bus message the entry ends after its TTL", async () => {
    const service = createRoutingSettingsService({ db: database.db, providerSlug: (n) => n });
    const cache = createRoutingSettingsCache({ db: database.db, ttlMs: 50 });
    const caller = { organizationId: org, workspaceId: ws };
    await service.update(cliActor(org), org, ws, { allowedProviders: null, allowedQuantizations: ["fp8"] });
    await waitFor("the workspace's new settings", async () => names(await cache.filtersFor(caller)).includes("workspace.routing_settings.allowed_quantizations"));
    expect(names(await cache.filtersFor(caller))).not.toContain("workspace.routing_settings.allowed_providers");
  });
});
