/**
 * GET /api/v1/key and GET /api/v1/providers take no query parameters: a query key is refused with 400
 * `bad_request` naming it (the gateway's closed query, docs/api.md), as on /models and /activity, never ignored;
 * a caller the core refuses gets its 401 first, as on /activity.
 * Real HTTP through the harness's gateway.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";

describe("GET /key and GET /providers refuse query keys they do not take", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  for (const path of ["/key", "/providers"]) {
    it(`${path}: answered without a query; a query key is 400 naming it`, async () => {
      const ok = await api(h, "GET", path, { key: h.tenant.apiKey });
      expect(ok.status, ok.text).toBe(200);
      for (const query of ["bogus=1", "bogus=", "limit=5&bogus=1"]) {
        const name = query.startsWith("limit") ? "limit" : "bogus";
        const res = await api(h, "GET", `${path}?${query}`, { key: h.tenant.apiKey });
        expect(res.status, res.text).toBe(400);
        expect(res.json).toEqual({
          error: {
            code: 400,
            message: `${name} is not a query parameter of this operation (none)`,
            metadata: { reason: "bad_request", retryable: false, field: name },
          },
        });
      }
      // Credentials are judged before the query, as on /activity: without a key (or with a wrong one) 401, whatever the query.
      for (const key of [undefined, "pk-v1-not-a-key"]) {
        const plain = await api(h, "GET", path, key ? { key } : {});
        expect(plain.status).toBe(401);
        const withQuery = await api(h, "GET", `${path}?bogus=1`, key ? { key } : {});
        expect(withQuery.status).toBe(401);
        expect(withQuery.json).toEqual(plain.json);
      }
    });
  }
});
