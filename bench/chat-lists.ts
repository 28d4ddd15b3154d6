/**
 * The work one chat request's lists cost before any upstream call (issue 26): a body with 95,000 distinct
 * `models` entries (~760 KB, under the 1 MiB body limit) through the ChatRequest definition and the model
 * de-duplication the plan stage does. Run: `node bin/run-ts.mjs bench/chat-lists.ts [entries]`.
 */
import { ChatRequest } from "../src/contract/requests/index.js";
import { modelsOf } from "../src/core/chat/routing.js";

const n = Number(process.argv[2] ?? 95_000);
const body = { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }], models: Array.from({ length: n }, (_, i) => `p${i.toString(36)}`) };
console.log(`body: ${JSON.stringify(body).length} bytes, ${n} models`);

let t = performance.now();
let outcome = "accepted";
try {
  ChatRequest.parse(body, { brand: "service" });
} catch (err) {
  outcome = `refused: ${(err as Error).message.length} chars of message`;
}
console.log(`validate: ${(performance.now() - t).toFixed(1)} ms (${outcome})`);

t = performance.now();
const models = modelsOf(body);
console.log(`de-duplicate models: ${(performance.now() - t).toFixed(1)} ms (${models.length} kept)`);
