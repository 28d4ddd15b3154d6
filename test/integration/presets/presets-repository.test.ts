/**
 * The preset creation statements are raw SQL per dialect; these tests read what they write back
 * through the ORM on both providers (types, timestamps, JSON), and check numbering, atomicity and
 * that a failed creation leaves nothing behind.
 */
import { describe, expect, it } from "vitest";
import { createPresetsRepository, PresetConflictError } from "../../../src/core/presets/presets-repository.js";
import { dbProviders, useDatabase } from "../../helpers/db.js";
import { waitFor } from "../../helpers/wait.js";

const config = {
  model: "openai/gpt-4o",
  temperature: 0.7,
  top_p: 1,
  seed: -9007199254740991,
  frequency_penalty: -1.5e-3,
  stop: ["\n\n", "it's \"quoted\" \\ back", "ünïcødé ✓ 🚀", "'; DROP TABLE \"Preset\"; --"],
  provider: { only: ["OpenAI"], sort: "price", allow_fallbacks: false, max_price: { prompt: 0.5 }, order: [] },
  plugins: [{ id: "web", max_results: 3, search_prompt: null }],
  response_format: { type: "json_schema", json_schema: { name: "x", strict: true, schema: { type: "object", properties: {} } } },
};

describe.each(dbProviders)("presets repository (%s)", (provider, fresh) => {
  const h = useDatabase(fresh);
  const repo = () => createPresetsRepository(h().db, { provider, backoffBaseMs: 1 });
  const input = (slug: string, extra: Partial<{ workspaceId: string; config: Record<string, unknown>; systemPrompt: string | null }> = {}) => ({
    workspaceId: extra.workspaceId ?? "ws-1",
    slug,
    creatorUserId: "user-1",
    config: extra.config ?? config,
    systemPrompt: extra.systemPrompt === undefined ? "Be brief." : extra.systemPrompt,
  });

  it("creates version 1 and returns exactly the rows the ORM reads back", async () => {
    const before = Date.now();
    const { preset, version } = await repo().createVersion(input("fresh"));
    const stored = await h().db.preset.findUniqueOrThrow({ where: { id: preset.id } });
    const storedVersion = await h().db.presetVersion.findUniqueOrThrow({ where: { id: version.id } });
    expect(preset).toEqual(stored);
    expect(version).toEqual(storedVersion);
    expect(preset).toMatchObject({
      workspaceId: "ws-1",
      slug: "fresh",
      name: "fresh",
      description: null,
      status: "active",
      statusUpdatedAt: null,
      creatorUserId: "user-1",
      designatedVersionId: version.id,
      latestVersion: 1,
    });
    expect(version).toMatchObject({ presetId: preset.id, version: 1, systemPrompt: "Be brief.", creatorId: "user-1" });
    expect(storedVersion.config).toEqual(config);
    expect(preset.createdAt).toBeInstanceOf(Date);
    expect(preset.createdAt.getTime()).toBeGreaterThanOrEqual(before - 1);
    expect(preset.createdAt.getTime()).toBeLessThanOrEqual(Date.now() + 1);
    expect(version.createdAt).toEqual(preset.createdAt);
    expect(preset.updatedAt).toEqual(preset.createdAt);
  });

  it("stores timestamps in the format the ORM writes, so ordering and filters mix both", async () => {
    const at = new Date("2031-02-03T04:05:06.789Z");
    const viaOrm = await h().db.preset.create({
      data: { workspaceId: "ws-fmt", slug: "orm", name: "orm", creatorUserId: "u", latestVersion: 0, createdAt: at, updatedAt: at },
    });
    const { preset } = await repo().createVersion(input("raw", { workspaceId: "ws-fmt" }));
    await h().db.preset.update({ where: { id: preset.id }, data: { updatedAt: at } });
    if (provider === "sqlite") {
      const rows = await h().db.$queryRawUnsafe<{ id: string; t: string; c: string }[]>(
        `SELECT "id", typeof("createdAt") AS t, CAST("createdAt" AS TEXT) AS c FROM "Preset" WHERE "workspaceId" = 'ws-fmt'`,
      );
      const raw = rows.find((r) => r.id === preset.id)!;
      const orm = rows.find((r) => r.id === viaOrm.id)!;
      expect(raw.t).toBe(orm.t);
      // Same shape as the ORM's text (e.g. 2031-02-03T04:05:06.789+00:00), differing only in the instant.
      expect(raw.c.replace(/\d/g, "0")).toBe(orm.c.replace(/\d/g, "0"));
    }
    // The ORM sees the raw row's timestamps as the same instants it writes itself.
    const found = await h().db.preset.findMany({ where: { workspaceId: "ws-fmt", updatedAt: at }, orderBy: { slug: "asc" } });
    expect(found.map((p) => p.slug)).toEqual(["orm", "raw"]);
    const newer = await h().db.preset.findMany({ where: { workspaceId: "ws-fmt", createdAt: { gt: at } } });
    expect(newer).toEqual([]);
  });

  it("adds version n+1 to an existing slug, designates it and advances updatedAt only", async () => {
    const first = await repo().createVersion(input("again", { systemPrompt: null, config: { model: "a" } }));
    // The next write is stamped later once the clock reads past this one's time.
    await waitFor("the clock past the first version's time", () => Date.now() > first.preset.updatedAt.getTime(), { intervalMs: 1 });
    const second = await repo().createVersion(input("again", { config: { model: "b", temperature: 0 } }));
    expect(second.preset.id).toBe(first.preset.id);
    expect(second.preset.latestVersion).toBe(2);
    expect(second.version.version).toBe(2);
    expect(second.preset.designatedVersionId).toBe(second.version.id);
    expect(second.preset.createdAt).toEqual(first.preset.createdAt);
    expect(second.preset.updatedAt.getTime()).toBeGreaterThan(first.preset.updatedAt.getTime());
    expect(second.preset).toEqual(await h().db.preset.findUniqueOrThrow({ where: { id: first.preset.id } }));
    const versions = await h().db.presetVersion.findMany({ where: { presetId: first.preset.id }, orderBy: { version: "asc" } });
    expect(versions).toEqual([first.version, second.version]);
    expect(versions.map((v) => [v.config, v.systemPrompt])).toEqual([
      [{ model: "a" }, null],
      [{ model: "b", temperature: 0 }, "Be brief."],
    ]);
  });

  it("keeps one slug per workspace apart", async () => {
    const a = await repo().createVersion(input("shared", { workspaceId: "ws-a" }));
    const b = await repo().createVersion(input("shared", { workspaceId: "ws-b" }));
    expect(a.preset.id).not.toBe(b.preset.id);
    expect([a.version.version, b.version.version]).toEqual([1, 1]);
  });

  it("numbers 50 concurrent creates on one slug 1..50 with the newest designated", async () => {
    const r = repo();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => r.createVersion(input("hot", { config: { seed: i } }))),
    );
    expect(results.map((x) => x.version.version).sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const preset = await h().db.preset.findUniqueOrThrow({ where: { workspaceId_slug: { workspaceId: "ws-1", slug: "hot" } } });
    expect(preset.latestVersion).toBe(50);
    const newest = results.find((x) => x.version.version === 50)!;
    expect(preset.designatedVersionId).toBe(newest.version.id);
    expect(await h().db.presetVersion.count({ where: { presetId: preset.id } })).toBe(50);
  });

  it("answers each of many interleaved concurrent creates with its own version (in call order on SQLite)", async () => {
    const groups: Array<[number, boolean]> = [];
    const r = createPresetsRepository(h().db, { provider, onGroupCommit: (size, ok) => groups.push([size, ok]) });
    const actor = { type: "api_key" as const, organizationId: "org-1", keyHash: "b".repeat(64), keyLabel: "pk-v1-bbb...bbbb", userId: "user-2" };
    // Slugs interleaved, half of the creations audited: on SQLite they share group transactions.
    const results = await Promise.all(
      Array.from({ length: 36 }, (_, i) =>
        r.createVersion({ ...input(`mix-${i % 3}`, { config: { seed: i } }), ...(i % 2 === 0 ? { actor } : {}) }),
      ),
    );
    results.forEach((res, i) => {
      expect(res.preset.slug).toBe(`mix-${i % 3}`);
      expect(res.version.config).toEqual({ seed: i });
      // SQLite commits a group in arrival order; PostgreSQL runs creations on several connections at once.
      if (provider === "sqlite") expect(res.version.version).toBe(Math.floor(i / 3) + 1);
      expect(res.preset.latestVersion).toBe(res.version.version);
      expect(res.preset.designatedVersionId).toBe(res.version.id);
      expect(res.version.presetId).toBe(res.preset.id);
    });
    for (const res of results) {
      expect(await h().db.presetVersion.findUniqueOrThrow({ where: { id: res.version.id } })).toEqual(res.version);
    }
    for (let k = 0; k < 3; k++) {
      const preset = await h().db.preset.findUniqueOrThrow({ where: { workspaceId_slug: { workspaceId: "ws-1", slug: `mix-${k}` } } });
      expect(preset.latestVersion).toBe(12);
      const mine = results.filter((_, i) => i % 3 === k);
      expect(mine.map((res) => res.version.version).sort((x, y) => x - y)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
      expect(preset.designatedVersionId).toBe(mine.find((res) => res.version.version === 12)!.version.id);
      const events = await h().db.auditEvent.findMany({ where: { targetId: preset.id, action: "preset.version.create" } });
      const audited = results.filter((_, i) => i % 3 === k && i % 2 === 0).map((res) => res.version.version)
        .sort((x, y) => x - y);
      expect(events.map((e) => (e.details as { version: number }).version).sort((x, y) => x - y)).toEqual(audited);
      expect(events.every((e) => e.actorKeyHash === actor.keyHash && e.actorUserId === "user-2" && e.workspaceId === "ws-1")).toBe(true);
    }
    // SQLite: creations made in the same turn of the event loop commit together, in one group transaction.
    if (provider === "sqlite") expect(groups).toEqual([[36, true]]);
  });

  it("writes nothing when the version row cannot be inserted", async () => {
    // An inconsistent preset whose next version number is already taken: the upsert succeeds, the
    // version INSERT violates (presetId, version), and the whole creation must roll back.
    const at = new Date("2030-01-01T00:00:00.000Z");
    const preset = await h().db.preset.create({
      data: { workspaceId: "ws-1", slug: "broken", name: "broken", creatorUserId: "u", latestVersion: 1, designatedVersionId: "v1", createdAt: at, updatedAt: at },
    });
    await h().db.presetVersion.create({ data: { id: "v2-squatter", presetId: preset.id, version: 2, config: {}, creatorId: "u" } });
    const err = await createPresetsRepository(h().db, { provider, maxAttempts: 3, backoffBaseMs: 1 })
      .createVersion(input("broken"))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PresetConflictError);
    expect((err as PresetConflictError).attempts).toBe(3);
    expect(await h().db.preset.findUniqueOrThrow({ where: { id: preset.id } })).toEqual(preset);
    expect(await h().db.presetVersion.count({ where: { presetId: preset.id } })).toBe(1);
  });

  it("commits concurrent creates together with their audit events, and one bad creation fails alone", async () => {
    // A slug whose next version is taken (as above) among 40 healthy concurrent creates: on SQLite they
    // share group transactions, so the broken one rolls its group back and the group runs again one by one.
    const at = new Date("2030-01-01T00:00:00.000Z");
    const broken = await h().db.preset.create({
      data: { workspaceId: "ws-1", slug: "broken-2", name: "broken-2", creatorUserId: "u", latestVersion: 1, designatedVersionId: "v1", createdAt: at, updatedAt: at },
    });
    await h().db.presetVersion.create({ data: { id: "v2-squatter-2", presetId: broken.id, version: 2, config: {}, creatorId: "u" } });
    const r = createPresetsRepository(h().db, { provider, maxAttempts: 2, backoffBaseMs: 1 });
    const actor = { type: "api_key" as const, organizationId: "org-1", keyHash: "a".repeat(64), keyLabel: "pk-v1-aaa...aaaa", userId: "user-1" };
    const outcomes = await Promise.allSettled([
      ...Array.from({ length: 40 }, (_, i) => r.createVersion({ ...input(`g-${i % 4}`, { config: { seed: i } }), actor })),
      r.createVersion({ ...input("broken-2"), actor }),
    ]);
    expect(outcomes.slice(0, 40).every((o) => o.status === "fulfilled")).toBe(true);
    expect(outcomes[40]!.status).toBe("rejected");
    for (let k = 0; k < 4; k++) {
      const preset = await h().db.preset.findUniqueOrThrow({ where: { workspaceId_slug: { workspaceId: "ws-1", slug: `g-${k}` } } });
      const versions = await h().db.presetVersion.findMany({ where: { presetId: preset.id }, orderBy: { version: "asc" } });
      expect(versions.map((v) => v.version)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
      const events = await h().db.auditEvent.findMany({ where: { targetId: preset.id, action: "preset.version.create" } });
      expect(events.map((e) => (e.details as { version: number }).version).sort((x, y) => x - y)).toEqual(versions.map((v) => v.version));
      expect(events.every((e) => e.actorKeyHash === actor.keyHash && e.workspaceId === "ws-1" && e.organizationId === "org-1")).toBe(true);
      expect(events[0]!.details).toEqual({ slug: `g-${k}`, version: expect.any(Number) });
    }
    expect(await h().db.auditEvent.count({ where: { targetId: broken.id } })).toBe(0);
  });
});
