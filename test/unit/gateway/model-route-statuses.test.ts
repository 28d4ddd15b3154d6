/**
 * The model routes (chat completions and the dialects) take every status of an error they raise themselves, or of a
 * stream they end in band, from the one reason table (src/contract/reasons.ts), never from an HTTP number written in
 * the route (issue 24, "In-stream errors through the reason table"). A source check: the shapes such numbers took.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const ROUTES = ["chat", "messages", "responses", "gemini", "embeddings", "dialect-reply"].map((n) => `src/gateway/routes/${n}.ts`);

describe("model routes: statuses from the reason table", () => {
  for (const file of ROUTES) {
    it(file, () => {
      const text = readFileSync(file, "utf8");
      // A stream ended while the server stops: `shutdown ? 503 : …`.
      expect(text).not.toMatch(/shutdown\s*\?\s*[1-5]\d\d\b/);
      // A refusal of the route's own built on a status: `new GatewayRefusal(400, …)`.
      expect(text).not.toMatch(/Refusal\(\s*[1-5]\d\d\b/);
    });
  }
});
