/**
 * Account-wide routing settings (docs/routing.md#account-wide-settings): an organization's and a workspace's
 * provider allow / ignore lists, allowed quantizations and data-policy defaults (`data_collection: "deny"`,
 * `zdr`). The plan stage applies them before the request's own `provider` preferences, so a request can only
 * narrow what its account allows; a setting that removes the last endpoint is a 400 naming the setting.
 *
 * Writes go through `createRoutingSettingsService` (audited in the same transaction, then announced on the
 * invalidation bus); the plan stage reads through `createRoutingSettingsCache` (at most `ttlMs` stale, dropped
 * at once by a bus message): no database query per request while the entry is fresh.
 */
import type { Db } from "../../db/client.js";
import { DbNull, type Prisma } from "../../db/prisma.js";
import type { InvalidationBus } from "../../lib/invalidation.js";
import { createTtlPairCache } from "../../lib/ttl-cache.js";
import { recordAudit, type Actor } from "../audit/audit-log.js";
import { invalidArgument, notFound } from "../errors.js";
import type { RoutingFilter } from "../chat/routing/route.js";
import { QUANTIZATIONS } from "../catalog/types.js";

/** The invalidation-bus topic of routing-settings changes; the key is the organization id. */
export const ROUTING_SETTINGS_TOPIC = "routing-settings";

export interface RoutingSettings {
  /** Provider slugs that alone may serve; null = any. */
  allowedProviders: string[] | null;
  /** Provider slugs that never serve; null = none. */
  ignoredProviders: string[] | null;
  /** Quantizations that alone may serve; null = any. */
  allowedQuantizations: string[] | null;
  /** "deny": only endpoints whose provider may not train on prompts. */
  dataCollection: "allow" | "deny";
  /** Only zero-data-retention endpoints. */
  zdr: boolean;
}

export interface StoredRoutingSettings extends RoutingSettings {
  organizationId: string;
  /** "" = the organization's own settings. */
  workspaceId: string;
  updatedAt: Date | null;
}

export const EMPTY_ROUTING_SETTINGS: RoutingSettings = { allowedProviders: null, ignoredProviders: null, allowedQuantizations: null, dataCollection: "allow", zdr: false };

const list = (v: unknown): string[] | null => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : null);

type Row = Awaited<ReturnType<Db["routingSettings"]["findMany"]>>[number];

function settingsOf(row: Row | undefined): RoutingSettings {
  if (!row) return { ...EMPTY_ROUTING_SETTINGS };
  return {
    allowedProviders: list(row.allowedProviders),
    ignoredProviders: list(row.ignoredProviders),
    allowedQuantizations: list(row.allowedQuantizations),
    dataCollection: row.dataCollection === "deny" ? "deny" : "allow",
    zdr: row.zdr,
  };
}

/** The wire names of the settings (HTTP body, gRPC fields, audit details). */
export const SETTING_FIELDS = {
  allowedProviders: "allowed_providers",
  ignoredProviders: "ignored_providers",
  allowedQuantizations: "allowed_quantizations",
  dataCollection: "data_collection",
  zdr: "zdr",
} as const;

/** A replacement of the settings, as a caller sends it (wire names; absent = unchanged, null = cleared). */
export type RoutingSettingsPatch = Partial<{ [K in keyof RoutingSettings]: unknown }>;

/**
 * Checks a patch field by field (400 naming the wire field) and gives the settings after it. Provider lists
 * take slugs or display names, case insensitive (`providerSlug` maps a lowercased name to its slug, undefined
 * when no provider is served by that name).
 */
export function applyPatch(current: RoutingSettings, patch: RoutingSettingsPatch, providerSlug: (name: string) => string | undefined): RoutingSettings {
  const out: RoutingSettings = { ...current };
  for (const key of ["allowedProviders", "ignoredProviders"] as const) {
    const v = patch[key];
    if (v === undefined) continue;
    const field = SETTING_FIELDS[key];
    if (v === null) {
      out[key] = null;
      continue;
    }
    if (!Array.isArray(v) || v.length > 100) throw invalidArgument(field, `${field} must be an array of at most 100 provider slugs, or null`);
    const slugs: string[] = [];
    v.forEach((x, i) => {
      if (typeof x !== "string" || x === "" || x.length > 100) throw invalidArgument(`${field}[${i}]`, `${field}[${i}] must be a provider slug`);
      const slug = providerSlug(x.toLowerCase());
      if (!slug) throw invalidArgument(`${field}[${i}]`, `${field}[${i}]: no provider "${x.slice(0, 100)}" is served here (GET /api/v1/providers lists them)`);
      if (!slugs.includes(slug)) slugs.push(slug);
    });
    out[key] = slugs;
  }
  if (patch.allowedQuantizations !== undefined) {
    const v = patch.allowedQuantizations;
    const field = SETTING_FIELDS.allowedQuantizations;
    if (v === null) out.allowedQuantizations = null;
    else {
      if (!Array.isArray(v)) throw invalidArgument(field, `${field} must be an array of quantizations, or null`);
      const qs: string[] = [];
      v.forEach((x, i) => {
        const q = typeof x === "string" ? x.toLowerCase() : "";
        if (!(QUANTIZATIONS as readonly string[]).includes(q)) throw invalidArgument(`${field}[${i}]`, `${field}[${i}] must be one of ${QUANTIZATIONS.join(", ")}`);
        if (!qs.includes(q)) qs.push(q);
      });
      out.allowedQuantizations = qs;
    }
  }
  if (patch.dataCollection !== undefined) {
    const v = patch.dataCollection;
    if (v !== "allow" && v !== "deny") throw invalidArgument("data_collection", 'data_collection must be "allow" or "deny"');
    out.dataCollection = v;
  }
  if (patch.zdr !== undefined) {
    if (typeof patch.zdr !== "boolean") throw invalidArgument("zdr", "zdr must be true or false");
    out.zdr = patch.zdr;
  }
  return out;
}

export function createRoutingSettingsService(deps: {
  db: Db;
  /** Lowercased provider slug or display name → slug; undefined when not served here. */
  providerSlug: (name: string) => string | undefined;
  /** Told after a commit (publish on the bus). */
  onChanged?: (organizationId: string) => Promise<void> | void;
}) {
  const { db } = deps;
  /** The workspace must be an active one of the organization ("" = the organization itself). */
  async function checkScope(organizationId: string, workspaceId: string): Promise<void> {
    if (workspaceId === "") {
      if (!(await db.organization.findUnique({ where: { id: organizationId }, select: { id: true } }))) throw notFound("Organization not found");
      return;
    }
    const ws = await db.workspace.findFirst({ where: { id: workspaceId, organizationId, deletedAt: null }, select: { id: true } });
    if (!ws) throw notFound("Workspace not found");
  }
  return {
    async get(organizationId: string, workspaceId: string): Promise<StoredRoutingSettings> {
      await checkScope(organizationId, workspaceId);
      const row = await db.routingSettings.findUnique({ where: { organizationId_workspaceId: { organizationId, workspaceId } } });
      return { ...settingsOf(row ?? undefined), organizationId, workspaceId, updatedAt: row?.updatedAt ?? null };
    },
    /** Replaces the fields the patch names; audited (`routing_settings.update`) in the same transaction. */
    async update(actor: Actor, organizationId: string, workspaceId: string, patch: RoutingSettingsPatch): Promise<StoredRoutingSettings> {
      await checkScope(organizationId, workspaceId);
      const result = await db.$transaction(async (tx) => {
        const where = { organizationId_workspaceId: { organizationId, workspaceId } };
        const before = settingsOf((await tx.routingSettings.findUnique({ where })) ?? undefined);
        const next = applyPatch(before, patch, deps.providerSlug);
        const data = {
          allowedProviders: next.allowedProviders === null ? DbNull : next.allowedProviders,
          ignoredProviders: next.ignoredProviders === null ? DbNull : next.ignoredProviders,
          allowedQuantizations: next.allowedQuantizations === null ? DbNull : next.allowedQuantizations,
          dataCollection: next.dataCollection,
          zdr: next.zdr,
          updatedAt: new Date(),
        } satisfies Prisma.RoutingSettingsUpdateInput;
        const row = await tx.routingSettings.upsert({ where, create: { organizationId, workspaceId, ...data }, update: data });
        const changed: Record<string, unknown> = {};
        for (const k of Object.keys(SETTING_FIELDS) as Array<keyof RoutingSettings>) {
          if (JSON.stringify(before[k]) !== JSON.stringify(next[k])) changed[SETTING_FIELDS[k]] = next[k];
        }
        await recordAudit(tx, actor, {
          action: "routing_settings.update",
          targetType: workspaceId === "" ? "organization" : "workspace",
          targetId: workspaceId === "" ? organizationId : workspaceId,
          workspaceId: workspaceId === "" ? null : workspaceId,
          details: { changed },
        });
        return { ...next, organizationId, workspaceId, updatedAt: row.updatedAt };
      });
      await deps.onChanged?.(organizationId);
      return result;
    },
  };
}

export type RoutingSettingsService = ReturnType<typeof createRoutingSettingsService>;

/** The filters of one scope's settings, named after the setting (`organization.ignored_providers`, …). */
export function filtersOf(scope: "organization" | "workspace", s: RoutingSettings): RoutingFilter[] {
  const f: RoutingFilter[] = [];
  const name = (k: keyof typeof SETTING_FIELDS) => `${scope}.routing_settings.${SETTING_FIELDS[k]}`;
  if (s.allowedProviders) {
    const only = new Set(s.allowedProviders);
    f.push({ field: name("allowedProviders"), keep: (c) => only.has(c.provider), why: `the ${scope}'s routing settings allow only ${s.allowedProviders.join(", ") || "no provider"}, and none of them serves the model` });
  }
  if (s.ignoredProviders?.length) {
    const ignore = new Set(s.ignoredProviders);
    f.push({ field: name("ignoredProviders"), keep: (c) => !ignore.has(c.provider), why: `the ${scope}'s routing settings ignore ${s.ignoredProviders.join(", ")}, the only providers that serve the model` });
  }
  if (s.allowedQuantizations) {
    const q = new Set(s.allowedQuantizations);
    f.push({ field: name("allowedQuantizations"), keep: (c) => c.endpoint !== undefined && q.has(c.endpoint.quantization), why: `the ${scope}'s routing settings allow only ${s.allowedQuantizations.join(", ") || "no quantization"}` });
  }
  if (s.dataCollection === "deny") {
    f.push({ field: name("dataCollection"), keep: (c) => c.endpoint !== undefined && !c.endpoint.data_policy.training, why: `the ${scope}'s routing settings deny data collection, and every endpoint of the model may train on prompts (or its terms are unknown)` });
  }
  if (s.zdr) {
    f.push({ field: name("zdr"), keep: (c) => c.endpoint?.zdr === true, why: `the ${scope}'s routing settings require zero-data-retention endpoints, and no endpoint of the model is one in the catalog` });
  }
  return f;
}

/**
 * The plan stage's reader: the organization's filters, then the workspace's, from one read of both rows per
 * (organization, workspace) per `ttlMs`; a bus message for the organization drops its entries at once.
 */
export function createRoutingSettingsCache(deps: { db: Db; ttlMs?: number; bus?: InvalidationBus }) {
  const cache = createTtlPairCache<readonly RoutingFilter[]>({ ttlMs: deps.ttlMs ?? 1000 });
  // Messages name an organization; the cache is small and changes are rare: drop everything.
  deps.bus?.subscribe(ROUTING_SETTINGS_TOPIC, () => cache.clear());
  const read = async (organizationId: string, workspaceId: string): Promise<readonly RoutingFilter[]> => {
    const rows = await deps.db.routingSettings.findMany({ where: { organizationId, workspaceId: { in: ["", workspaceId] } } });
    const org = rows.find((r) => r.workspaceId === "");
    const ws = workspaceId === "" ? undefined : rows.find((r) => r.workspaceId === workspaceId);
    return [...(org ? filtersOf("organization", settingsOf(org)) : []), ...(ws ? filtersOf("workspace", settingsOf(ws)) : [])];
  };
  return {
    filtersFor: (caller: { organizationId: string; workspaceId: string }) => cache.get(caller.organizationId, caller.workspaceId, read),
  };
}
