/**
 * GET /api/v1/key through the published SDK: getCurrentKeyMetadata parses it, and every field holds
 * what Portico enforces (the intern turn rate limit of the configuration, no credit limit, no spend).
 */
import { OpenRouter } from "@openrouter/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../helpers/harness.js";

describe("current key metadata", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ env: { PORTICO_INTERN_RATE_LIMIT: "17", PORTICO_INTERN_RATE_WINDOW_S: "45" } });
  });
  afterAll(() => h?.close());
  const sdk = (apiKey: string) => new OpenRouter({ apiKey, serverURL: `${h.baseUrl}/api/v1`, retryConfig: { strategy: "none" } });

  it("is parsed by @openrouter/sdk with true values for an ordinary and a management key", async () => {
    for (const [key, management, hash] of [
      [h.tenant.apiKey, false, h.tenant.apiKeyHash],
      [h.tenant.managementKey, true, h.tenant.managementKeyHash],
    ] as const) {
      const res = await sdk(key).apiKeys.getCurrentKeyMetadata();
      const d = res.data as any;
      expect(d.isManagementKey).toBe(management);
      expect(d.isProvisioningKey).toBe(management);
      expect(d.rateLimit).toEqual({ requests: 17, interval: "45s", note: "intern turns per key" });
      expect(d.limit).toBeNull();
      expect(d.limitRemaining).toBeNull();
      expect(d.usage).toBe(0);
      expect(d.isFreeTier).toBe(false);
      expect(d.workspaceId).toBe(h.tenant.workspaceId);
      expect(d.organizationId).toBe(h.tenant.organizationId);
      expect(d.creatorUserId).toBe(h.tenant.userId);
      expect(d.label).not.toContain(key.slice(10));
      const raw = await fetch(`${h.baseUrl}/api/v1/key`, { headers: { authorization: `Bearer ${key}` } });
      expect(((await raw.json()) as any).data.hash).toBe(hash);
    }
  });
});
