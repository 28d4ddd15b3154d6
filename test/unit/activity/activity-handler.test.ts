/**
 * The activity handler's window and rules at a fixed "now" (the integration test, activity.test.ts, runs the
 * same against the real databases at the wall clock): the UTC days each request totals, the date rule's bounds
 * on both sides of UTC midnight, and exact merging of rows into canonical models.
 */
import { createContextValues, type HandlerContext } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createActivityHandler, present, usdString } from "../../../src/core/activity/activity-handler.js";
import type { ActivityQuery, ActivityRow } from "../../../src/core/activity/activity-repository.js";
import { kCaller, type Caller } from "../../../src/core/auth.js";

const caller = (isManagement: boolean): Caller => ({
  keyId: "k", keyHash: "a".repeat(64), keyLabel: "l", organizationId: "org", workspaceId: "ws", userId: "u", isManagement, internsProgramme: false,
});
const ctx = (c: Caller) => ({ values: createContextValues().set(kCaller, c) }) as unknown as HandlerContext;

function handler(now: string) {
  const queries: ActivityQuery[] = [];
  const h = createActivityHandler({
    db: {} as never,
    activity: { totals: async (q) => (queries.push(q), []) },
    canonicalSlug: () => undefined,
    flush: async () => undefined,
    now: () => new Date(now),
  });
  return { h, queries };
}

const row = (over: Partial<ActivityRow>): ActivityRow => ({
  date: "2026-11-25", provider: "openai", model: "gpt-4o", workspaceId: null, keyHash: null, usageFemtoUsd: 0n, byokUsageFemtoUsd: 0n,
  requests: 1n, promptTokens: 0n, completionTokens: 0n, reasoningTokens: 0n, cachedTokens: 0n, ...over,
});

describe("activity handler", () => {
  it("totals the 30 completed UTC days, the 30 ending today with include_today, or one day", async () => {
    // One millisecond before midnight and at midnight: the window moves by a day exactly then.
    for (const [now, first, end] of [
      ["2026-11-26T23:59:59.999Z", "2026-10-27T00:00:00.000Z", "2026-11-26T00:00:00.000Z"],
      ["2026-11-27T00:00:00.000Z", "2026-10-28T00:00:00.000Z", "2026-11-27T00:00:00.000Z"],
    ] as const) {
      const { h, queries } = handler(now);
      await h.getActivity({ includeToday: false } as never, ctx(caller(true)));
      await h.getActivity({ includeToday: true } as never, ctx(caller(true)));
      await h.getActivity({ date: "2026-11-20", includeToday: false } as never, ctx(caller(true)));
      expect(queries.map((q) => [q.from.toISOString(), q.to.toISOString(), q.grouping])).toEqual([
        [first, end, "endpoint"],
        [new Date(Date.parse(first) + 86_400_000).toISOString(), new Date(Date.parse(end) + 86_400_000).toISOString(), "endpoint"],
        ["2026-11-20T00:00:00.000Z", "2026-11-21T00:00:00.000Z", "endpoint"],
      ]);
    }
  });

  it("date accepts today and the 30 completed days before it, nothing else; an ordinary key reads its own hash", async () => {
    const { h, queries } = handler("2026-11-26T00:00:00.000Z");
    for (const ok of ["2026-10-27", "2026-11-26"]) await h.getActivity({ date: ok, includeToday: false } as never, ctx(caller(true)));
    for (const bad of ["2026-10-26", "2026-11-27", "2026-11-31", "26-11-2026"]) {
      await expect(h.getActivity({ date: bad, includeToday: false } as never, ctx(caller(true)))).rejects.toThrow(/date must be a UTC day YYYY-MM-DD from 2026-10-27 to 2026-11-26/);
    }
    await h.getActivity({ includeToday: false, groupBy: "key" } as never, ctx(caller(false)));
    expect(queries.at(-1)).toMatchObject({ keyHash: "a".repeat(64), grouping: "key", organizationId: "org" });
    await expect(h.getActivity({ includeToday: false, apiKeyHash: "b".repeat(64) } as never, ctx(caller(false)))).rejects.toThrow(/another key's activity/);
  });

  it("merges a model's rows exactly and renders USD as exact decimals", () => {
    const slug = (p: string, m: string) => (p === "openai" && m.startsWith("gpt-4o") ? "openai/gpt-4o" : undefined);
    const items = present(
      [
        row({ model: "gpt-4o", usageFemtoUsd: 100_000_000_000_000n }),
        row({ model: "gpt-4o-2024-08-06", usageFemtoUsd: 200_000_000_000_000n, promptTokens: 5n }),
        row({ provider: "vllm", model: "mine", usageFemtoUsd: 9_223_372_036_854_775_807n * 3n }),
      ],
      "model",
      slug,
    );
    expect(items.map((i) => [i.model, i.usageUsd, i.requests, i.promptTokens])).toEqual([
      ["openai/gpt-4o", "0.3", 2n, 5n],
      ["vllm/mine", "27670.116110564327421", 1n, 0n],
    ]);
    expect(usdString(1n)).toBe("0.000000000000001");
    expect(usdString(10_000n * 10n ** 15n)).toBe("10000");
  });
});
