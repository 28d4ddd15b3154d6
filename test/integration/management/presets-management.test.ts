import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";

describe.each(["sqlite", "postgresql"] as const)("preset management (%s)", (provider) => {
  let h: Harness;
  let other: Tenant;
  let presetsGrpc: any;
  const version = (slug: string, temperature: number) =>
    api(h, "POST", `/presets/${slug}/chat/completions`, {
      key: h.tenant.managementKey,
      body: { model: "openai/gpt-4o", temperature, messages: [{ role: "user", content: "hi" }] },
    });

  beforeAll(async () => {
    h = await startHarness({ provider });
    other = await h.createTenant();
    presetsGrpc = grpcClient("portico/presets/v1/presets_service.proto", "portico.presets.v1.PresetsService", h.coreUrl);
  });
  afterAll(async () => {
    presetsGrpc?.close();
    await h?.close();
  });

  it("renames, describes, designates an older version and archives a preset, audited", async () => {
    const mk = h.tenant.managementKey;
    await version("support-bot", 0.1);
    await version("support-bot", 0.2);
    const renamed = await api(h, "PATCH", "/presets/support-bot", { key: mk, body: { name: "Support bot", description: "tier 1" } });
    expect(renamed.status).toBe(200);
    expect(renamed.json.data).toMatchObject({ slug: "support-bot", name: "Support bot", description: "tier 1", status: "active" });
    expect(renamed.json.data.designated_version.version).toBe(2);

    const designated = await api(h, "PATCH", "/presets/support-bot", { key: mk, body: { designated_version: 1 } });
    expect(designated.json.data.designated_version).toMatchObject({ version: 1, config: { temperature: 0.1 } });
    expect(designated.json.data.designated_version_id).toBe(designated.json.data.designated_version.id);
    const read = await api(h, "GET", "/presets/support-bot", { key: h.tenant.apiKey });
    expect(read.json.data.designated_version.version).toBe(1);

    const archived = await api(h, "PATCH", "/presets/support-bot", { key: mk, body: { status: "archived", description: null } });
    expect(archived.json.data).toMatchObject({ status: "archived", description: null });
    expect(Number.isNaN(Date.parse(archived.json.data.status_updated_at))).toBe(false);

    // A new version is designated and keeps the status.
    const v3 = await version("support-bot", 0.3);
    expect(v3.json.data).toMatchObject({ status: "archived", designated_version: { version: 3 } });

    const audit = await api(h, "GET", `/audit?action=preset.update&target_id=${read.json.data.id}`, { key: mk });
    expect(audit.json.data.map((e: any) => e.details).reverse()).toEqual([
      { slug: "support-bot", name: "Support bot", description: "tier 1" },
      { slug: "support-bot", designated_version: 1 },
      { slug: "support-bot", status: "archived", description: null },
    ]);
  });

  it("refuses bad values with 400, ordinary keys with 403, unknown and foreign presets with 404", async () => {
    const mk = h.tenant.managementKey;
    await version("checked", 0.5);
    for (const [body, field] of [
      [{ designated_version: 9 }, "designated_version"],
      [{ designated_version: 0 }, "designated_version"],
      [{ status: "gone" }, "status"],
      [{ name: "" }, "name"],
      [{ slug: "renamed" }, "slug"],
    ] as const) {
      const res = await api(h, "PATCH", "/presets/checked", { key: mk, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(JSON.stringify(res.json.error)).toContain(field);
    }
    const forbidden = await api(h, "PATCH", "/presets/checked", { key: h.tenant.apiKey, body: { name: "x" } });
    expect(forbidden.status).toBe(403);
    expect((await api(h, "PATCH", "/presets/nothing-here", { key: mk, body: { name: "x" } })).status).toBe(404);
    // The other organization's management key cannot see this preset.
    const foreign = await api(h, "PATCH", "/presets/checked", { key: other.managementKey, body: { name: "mine" } });
    expect(foreign.status).toBe(404);
    expect((await api(h, "GET", "/presets/checked", { key: mk })).json.data.name).toBe("checked");
  });

  it("offers UpdatePreset over gRPC with the same rules", async () => {
    await version("grpc-preset", 0.4);
    const res = await unary(
      presetsGrpc,
      "UpdatePreset",
      { slug: "grpc-preset", status: "disabled", update_mask: { paths: ["status"] } },
      bearer(h.tenant.managementKey),
    );
    expect(res.error).toBeUndefined();
    expect(res.response.preset.status).toBe("disabled");
    const forbidden = await unary(presetsGrpc, "UpdatePreset", { slug: "grpc-preset", update_mask: { paths: ["status"] }, status: "active" }, bearer(h.tenant.apiKey));
    expect(forbidden.error?.code).toBe(7);
    const foreign = await unary(presetsGrpc, "UpdatePreset", { slug: "grpc-preset", update_mask: { paths: ["name"] }, name: "x" }, bearer(other.managementKey));
    expect(foreign.error?.code).toBe(5);
  });
});
