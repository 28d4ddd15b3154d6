/**
 * The published SDK (@openrouter/sdk 1.3.19) parses every preset response of ours without error.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OpenRouter } from "@openrouter/sdk";
import { startHarness, type Harness } from "../../helpers/harness.js";

describe("presets through @openrouter/sdk", () => {
  let h: Harness;
  let mgmt: OpenRouter;
  let plain: OpenRouter;
  const sdk = (apiKey: string) =>
    new OpenRouter({ apiKey, serverURL: `${h.baseUrl}/api/v1`, retryConfig: { strategy: "none" } });

  beforeAll(async () => {
    h = await startHarness({ provider: "sqlite" });
    mgmt = sdk(h.tenant.managementKey);
    plain = sdk(h.tenant.apiKey);
  });
  afterAll(async () => {
    await h?.close();
  });

  it("creates, gets, lists, lists versions and gets a version", async () => {
    const chatRequest = {
      messages: [
        { role: "system" as const, content: "You are a helpful assistant." },
        { role: "user" as const, content: "Hello!" },
      ],
      model: "openai/gpt-4o",
      temperature: 0.7,
      provider: { allowFallbacks: false, sort: "price" as const },
    };
    const created = await mgmt.presets.createPresetsChatCompletions({ slug: "sdk-preset", chatRequest });
    expect(created.data.slug).toBe("sdk-preset");
    expect(created.data.designatedVersion?.version).toBe(1);
    expect(created.data.designatedVersion?.systemPrompt).toBe("You are a helpful assistant.");
    expect(created.data.designatedVersion?.config).toEqual({
      model: "openai/gpt-4o",
      temperature: 0.7,
      provider: { allow_fallbacks: false, sort: "price" },
    });
    expect(created.data.description).toBeNull();
    expect(created.data.createdAt).toBeTruthy();

    const second = await mgmt.presets.createPresetsChatCompletions({ slug: "sdk-preset", chatRequest: { ...chatRequest, temperature: 1 } });
    expect(second.data.designatedVersion?.version).toBe(2);

    const got = await plain.presets.get({ slug: "sdk-preset" });
    expect(got.data.designatedVersionId).toBe(second.data.designatedVersion?.id);

    const list = await plain.presets.list({});
    const page = "result" in list ? (list as { result: { data: unknown[]; totalCount: number } }).result : (list as unknown as { data: unknown[]; totalCount: number });
    expect(page.totalCount).toBe(1);
    expect(page.data).toHaveLength(1);

    const versions = await plain.presets.listVersions({ slug: "sdk-preset" });
    const vpage = "result" in versions ? (versions as { result: { data: Array<{ version: number } | null>; totalCount: number } }).result : (versions as unknown as { data: Array<{ version: number } | null>; totalCount: number });
    expect(vpage.totalCount).toBe(2);
    expect(vpage.data.map((v) => v?.version)).toEqual([1, 2]);

    const v1 = await plain.presets.getVersion({ slug: "sdk-preset", version: "1" });
    expect(v1.data?.version).toBe(1);
  });

  it("maps our errors to the SDK's typed error classes", async () => {
    const denied = await plain.presets
      .createPresetsChatCompletions({ slug: "sdk-denied", chatRequest: { messages: [{ role: "user", content: "x" }] } })
      .catch((e: unknown) => e);
    expect((denied as { constructor: { name: string } }).constructor.name).toBe("ForbiddenResponseError");
    const missing = await plain.presets.get({ slug: "nope" }).catch((e: unknown) => e);
    expect((missing as { constructor: { name: string } }).constructor.name).toBe("NotFoundResponseError");
    const bad = await mgmt.presets
      .createPresetsChatCompletions({ slug: "sdk-bad", chatRequest: { messages: [{ role: "user", content: "x" }], temperature: 5 } })
      .catch((e: unknown) => e);
    expect((bad as { constructor: { name: string } }).constructor.name).toBe("BadRequestResponseError");
    expect((bad as { error?: { message?: string } }).error?.message ?? String(bad)).toContain("temperature");
  });
});
