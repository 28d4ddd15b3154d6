/**
 * A fake moderation provider on loopback in OpenAI's moderations wire format (`POST /v1/moderations` with
 * `{model, input}` → `{id, model, results: [{flagged, categories, category_scores}]}`): an input containing one of
 * `flagWords` is flagged under that word's categories. Records every request; `failStatus` answers an error.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const CATEGORIES = [
  "harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent", "self-harm",
  "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence", "violence/graphic",
];

export interface FakeModeration {
  url: string;
  requests: Array<{ headers: Record<string, unknown>; body: any }>;
  /** Word (case-insensitive) → the categories it flags. */
  flagWords: Record<string, string[]>;
  failStatus?: number;
  close(): Promise<void>;
}

export async function startFakeModeration(flagWords: Record<string, string[]> = { attack: ["violence", "harassment/threatening"] }): Promise<FakeModeration> {
  const fake: FakeModeration = { url: "", requests: [], flagWords, close: async () => undefined };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
    fake.requests.push({ headers: req.headers, body });
    if (req.method !== "POST" || req.url !== "/v1/moderations") {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "not found", type: "invalid_request_error" } }));
      return;
    }
    if (fake.failStatus) {
      res.writeHead(fake.failStatus, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "moderation is down", type: "server_error" } }));
      return;
    }
    const inputs: string[] = typeof body.input === "string" ? [body.input] : body.input;
    const results = inputs.map((text) => {
      const hits = new Set(Object.entries(fake.flagWords).filter(([w]) => text.toLowerCase().includes(w.toLowerCase())).flatMap(([, c]) => c));
      return {
        flagged: hits.size > 0,
        categories: Object.fromEntries(CATEGORIES.map((c) => [c, hits.has(c)])),
        category_scores: Object.fromEntries(CATEGORIES.map((c) => [c, hits.has(c) ? 0.97 : 0.0001])),
        category_applied_input_types: Object.fromEntries(CATEGORIES.map((c) => [c, hits.has(c) ? ["text"] : []])),
      };
    });
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: "modr-fake", model: body.model, results }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return fake;
}
