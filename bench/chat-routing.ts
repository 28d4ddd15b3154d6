/**
 * What planning a chat request costs with routing through the model catalog (issue 27): CPU time per run of the
 * plan stage (src/core/chat/pipeline/plan.ts) in this process, for the model ids of the hot-path benchmark and
 * for catalog slugs, with credentials already cached (a store in memory, as the 1-second credential cache is on
 * the hot path). The best of `--repeats` runs of `--iterations` calls (CPU time of this process).
 *
 *   node bin/run-ts.mjs bench/chat-routing.ts [--iterations 20000] [--repeats 5] [--root <checkout>]
 *
 * `--root` runs the plan stage of another checkout (e.g. an export of main: the "before" figures); cases its
 * plan stage cannot route are reported as "refused".
 */
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const iterations = Number(arg("iterations", "20000"));
const repeats = Number(arg("repeats", "5"));
const root = resolve(arg("root", "."));
const load = (p: string) => import(pathToFileURL(resolve(root, p)).href);

const { createPlanStage } = await load("src/core/chat/pipeline/plan.ts");
const { newCall } = await load("src/core/chat/pipeline/stage.ts");
const { ProviderRegistry } = await load("src/core/chat/providers/index.ts");
const { createCatalog } = await import("../src/core/catalog/catalog.js");
const { BUILTIN_CATALOG } = await import("../src/core/catalog/builtin-catalog.js");
const { createMemoryHealthMemory } = await import("../src/lib/health-memory.js");
const { createEndpointStats } = await import("../src/core/chat/routing/endpoint-stats.js");

const caller = { keyId: "k", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o", workspaceId: "w", userId: "u", isManagement: false, internsProgramme: false };
const creds = new Map<string, unknown[]>();
const credentials = {
  forProvider: async (_w: string, provider: string) => {
    let c = creds.get(provider);
    if (!c) {
      c = [{ id: `${provider}-1`, provider, disabled: false, allowedModels: null, allowedApiKeyHashes: null, allowedUserIds: null, isRequired: false, isFallback: false, isByokOnly: false, sortOrder: 0, createdAt: new Date(0), apiKey: "sk" }];
      creds.set(provider, c);
    }
    return c;
  },
  listAll: async () => [],
};
const stats = createEndpointStats();
for (const provider of ["groq", "together", "fireworks"]) {
  for (let i = 0; i < 50; i++) stats.observe({ status: "success", catalogModel: "meta-llama/llama-3.3-70b-instruct", provider, attempts: 1, latencyMs: 1000 + i, timeToFirstTokenMs: 100 + i, completionTokens: 200, streamed: true });
}
const plan = createPlanStage({ credentials, providers: new ProviderRegistry(), maxAttempts: 10, catalog: createCatalog(BUILTIN_CATALOG), stats, health: createMemoryHealthMemory() });
const answer = async () => ({ kind: "completion", completion: {} });
const messages = [{ role: "user", content: "Say hello." }];
const signal = new AbortController().signal;

const CASES: Array<[string, Record<string, unknown>]> = [
  ["groq/llama-3.3-70b (hot-path bench id, uncatalogued)", { model: "groq/llama-3.3-70b", messages }],
  ["groq/llama-3.3-70b-versatile (catalogued provider id)", { model: "groq/llama-3.3-70b-versatile", messages }],
  ["meta-llama/llama-3.3-70b-instruct (3 endpoints, load balanced)", { model: "meta-llama/llama-3.3-70b-instruct", messages }],
  ["… :nitro + max_price + data_collection deny + require_parameters", { model: "meta-llama/llama-3.3-70b-instruct:nitro", messages, temperature: 0.2, provider: { max_price: { prompt: "1" }, data_collection: "deny", require_parameters: true } }],
];

async function cost(body: Record<string, unknown>): Promise<number | "refused"> {
  const once = async () => plan.run(newCall(caller, signal, false, body), answer);
  try {
    for (let i = 0; i < 2000; i++) await once();
  } catch {
    return "refused";
  }
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < iterations; i++) await once();
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / iterations);
  }
  return best;
}

console.log(`plan stage of ${root}; load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
console.log("| case | CPU µs per plan |\n|---|---:|");
for (const [name, body] of CASES) {
  const c = await cost(body);
  console.log(`| ${name} | ${typeof c === "number" ? c.toFixed(2) : c} |`);
}
console.log(`load average at end ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
