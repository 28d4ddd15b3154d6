/**
 * ActivityService: daily totals of the caller's organization's generations (docs/api.md, "Activity").
 *
 * Who reads what: a management key reads the whole organization's activity (every workspace, every key); any
 * other key reads only the generations it made itself (its rows are always filtered to its own hash, and
 * naming another key's hash is refused with 403). Another organization's generations never appear: the one
 * query is filtered by the caller's organization first.
 *
 * The window is in UTC days: the 30 completed days ending yesterday (as the real-world service), the 30 days
 * ending today with `include_today`, or the single day `date` (one of the last 30 completed days, or today).
 */
import type { ServiceImpl } from "@connectrpc/connect";
import { usdString } from "../../contract/money.js";
import type { Db } from "../../db/client.js";
import type { ActivityItem, ActivityService } from "../../gen/portico/activity/v1/activity_service_pb.js";
import { callerOf } from "../auth.js";
import { invalidArgument, notFound, permissionDenied } from "../errors.js";
import type { Init } from "../proto-init.js";
import type { ActivityGrouping, ActivityRepository, ActivityRow } from "./activity-repository.js";

const DAY_MS = 86_400_000;
/** Days in the window. */
export const ACTIVITY_DAYS = 30;
const GROUPINGS: Record<string, ActivityGrouping> = { "": "endpoint", workspace: "workspace", model: "model", provider: "provider", key: "key" };

export interface ActivityHandlerDeps {
  db: Db;
  activity: ActivityRepository;
  /** The catalog's canonical slug of a provider's model id (an alias included); undefined when uncatalogued. */
  canonicalSlug: (provider: string, providerModelId: string) => string | undefined;
  /** Writes generation records still queued, so a generation answered a moment ago is counted. */
  flush: () => Promise<void>;
  now?: () => Date;
}

function utcMidnight(d: Date): number {
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
}

/** `YYYY-MM-DD` of a real calendar day → its UTC midnight, else undefined. */
function parseDay(s: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return undefined;
  const t = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  return new Date(t).toISOString().slice(0, 10) === s ? t : undefined;
}

/** What a workspace or user id may look like (they are UUIDs); anything else never reaches the database. */
const ID = /^[A-Za-z0-9._:@-]{1,200}$/;

const iso = (t: number) => new Date(t).toISOString().slice(0, 10);

export function createActivityHandler(deps: ActivityHandlerDeps): ServiceImpl<typeof ActivityService> {
  const now = deps.now ?? (() => new Date());
  return {
    async getActivity(req, ctx) {
      const caller = callerOf(ctx);
      const today = utcMidnight(now());
      const grouping = GROUPINGS[req.groupBy ?? ""];
      if (grouping === undefined) throw invalidArgument("group_by", "group_by must be one of workspace, model, provider, key (or left out)");
      let from: number;
      let to: number;
      if (req.date !== undefined && req.date !== "") {
        const day = parseDay(req.date);
        if (day === undefined || day < today - ACTIVITY_DAYS * DAY_MS || day > today) {
          throw invalidArgument("date", `date must be a UTC day YYYY-MM-DD from ${iso(today - ACTIVITY_DAYS * DAY_MS)} to ${iso(today)} (the last ${ACTIVITY_DAYS} completed days or today)`);
        }
        from = day;
        to = day + DAY_MS;
      } else if (req.includeToday) {
        from = today - (ACTIVITY_DAYS - 1) * DAY_MS;
        to = today + DAY_MS;
      } else {
        from = today - ACTIVITY_DAYS * DAY_MS;
        to = today;
      }
      let keyHash = req.apiKeyHash === "" ? undefined : req.apiKeyHash;
      if (keyHash !== undefined && !/^[0-9a-f]{64}$/.test(keyHash)) throw invalidArgument("api_key_hash", "api_key_hash must be an API key hash (64 lowercase hex characters)");
      if (!caller.isManagement) {
        if (keyHash !== undefined && keyHash !== caller.keyHash) {
          throw permissionDenied("Only management keys can read another key's activity; this key reads its own");
        }
        keyHash = caller.keyHash;
      }
      const workspaceId = req.workspaceId === "" ? undefined : req.workspaceId;
      if (workspaceId !== undefined) {
        if (!ID.test(workspaceId)) throw invalidArgument("workspace_id", "workspace_id is not a workspace id");
        const ws = await deps.db.workspace.findFirst({ where: { id: workspaceId, organizationId: caller.organizationId }, select: { id: true } });
        if (!ws) throw notFound("No such workspace in this organization");
      }
      const userId = req.userId === "" ? undefined : req.userId;
      if (userId !== undefined && !ID.test(userId)) throw invalidArgument("user_id", "user_id is not a user id");

      await deps.flush();
      const rows = await deps.activity.totals({
        organizationId: caller.organizationId,
        from: new Date(from),
        to: new Date(to),
        grouping,
        keyHash,
        workspaceId,
        creatorUserId: userId,
      });
      return { data: present(rows, grouping, deps.canonicalSlug) };
    },
  };
}

type Item = Init<ActivityItem>;
/** An item while rows are merged: money still in integer femto-dollars. */
type Acc = Omit<Item, "usageUsd" | "byokUsageInferenceUsd"> & { usage: bigint; byok: bigint };

export { usdString };

/** Database rows → items: canonical model slugs applied (rows of one model under several ids merged, exactly), sorted. */
export function present(rows: ActivityRow[], grouping: ActivityGrouping, canonicalSlug: ActivityHandlerDeps["canonicalSlug"]): Item[] {
  const merged = new Map<string, Acc>();
  for (const r of rows) {
    const served = r.provider !== null ? `${r.provider}/${r.model ?? ""}` : undefined;
    const model = r.provider !== null && r.model !== null ? (canonicalSlug(r.provider, r.model) ?? served) : undefined;
    const item: Acc = {
      date: r.date,
      usage: r.usageFemtoUsd,
      byok: r.byokUsageFemtoUsd,
      requests: r.requests,
      promptTokens: r.promptTokens,
      completionTokens: r.completionTokens,
      reasoningTokens: r.reasoningTokens,
      cachedTokens: r.cachedTokens,
    };
    if (grouping === "endpoint" || grouping === "workspace") {
      item.model = model;
      item.modelPermaslug = served;
      item.endpointId = served;
      item.providerName = r.provider ?? undefined;
      if (grouping === "workspace") item.workspaceId = r.workspaceId ?? undefined;
    } else if (grouping === "model") {
      item.model = model;
    } else if (grouping === "provider") {
      item.providerName = r.provider ?? undefined;
    } else {
      item.apiKeyHash = r.keyHash ?? undefined;
    }
    const key = [item.date, item.model, item.endpointId, item.providerName, item.workspaceId, item.apiKeyHash].join("\u0000");
    const prior = merged.get(key);
    if (!prior) {
      merged.set(key, item);
      continue;
    }
    prior.usage += item.usage;
    prior.byok += item.byok;
    prior.requests += item.requests;
    prior.promptTokens += item.promptTokens;
    prior.completionTokens += item.completionTokens;
    prior.reasoningTokens += item.reasoningTokens;
    prior.cachedTokens += item.cachedTokens;
  }
  const label = (i: Acc) => [i.model ?? "", i.endpointId ?? "", i.providerName ?? "", i.workspaceId ?? "", i.apiKeyHash ?? ""].join("\u0000");
  return [...merged.values()]
    .sort((a, b) => (a.date < b.date ? -1 : a.date > b.date ? 1 : label(a) < label(b) ? -1 : label(a) > label(b) ? 1 : 0))
    .map(({ usage, byok, ...rest }) => ({ ...rest, usageUsd: usdString(usage), byokUsageInferenceUsd: usdString(byok) }));
}
