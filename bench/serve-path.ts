/**
 * CPU of `portico serve`'s whole per-request path in one process, this tree against another checkout's `src/` (no
 * build needed), taking turns (issue 24, "the per-request path"): the core and the gateway built as serve builds them
 * (createCore, buildGateway over the core's in-process transport, fresh SQLite, the logger at `info` into a sink
 * that drops the lines, BYOK credentials for the fake provider), requests sent with Fastify's `inject` (no client
 * socket; the request and response objects are light-my-request's, the same for both trees), the upstream a fake
 * OpenAI-compatible provider in this process (its CPU counted, the same for both trees). Two routes:
 *
 * - `POST /api/v1/chat/completions`, non-streamed (the hot-path bench's request: groq/llama-3.3-70b, "Say hello.");
 * - `GET /api/v1/key` (the bench:quick `key_cache_share_of_bare_http_pct` route).
 *
 * CPU of this process per request (`process.cpuUsage`, the generation records' timer included), `--concurrency`
 * requests in flight, best of `--repeats`. Steadier than the end-to-end bench on a loaded machine; it does not
 * see the sockets' and Node's HTTP parser's share (the bare relay pays those too).
 *
 *   node bin/run-ts.mjs bench/serve-path.ts [--base /work/base-main] [--requests 4000] [--concurrency 8]
 *       [--pairs 3] [--repeats 3] [--only chat|key]
 */
import { Writable } from "node:stream";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { startFakeOpenAI } from "../test/helpers/fake-upstreams/openai.js";
import { flag } from "./lib/args.js";

const requests = Number(flag("requests") ?? 4000);
const concurrency = Number(flag("concurrency") ?? 8);
const pairs = Number(flag("pairs") ?? 3);
const repeats = Number(flag("repeats") ?? 3);
const base = flag("base");
/** `--only chat` or `--only key`: that route alone (e.g. under `node --cpu-prof`). */
const only = flag("only");

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

interface Inject {
  (opts: { method: string; url: string; headers: Record<string, string>; payload?: string }): Promise<{ statusCode: number; body: string }>;
}

interface Stack {
  chat(): Promise<void>;
  key(): Promise<void>;
  close(): Promise<void>;
}

const fake = await startFakeOpenAI({ text: ["Hello", ", ", "world", "!"], finish: "stop", usage: { input: 12, output: 4 } });
const dirs: string[] = [];

async function stackAt(root: string): Promise<Stack> {
  const m = (p: string) => import(pathToFileURL(resolve(root, "src", p)).href);
  const [{ openDatabase }, { createCore }, { buildGateway }, { bootstrap }, { createLogger }, { createMetrics }, { loadConfig }] = await Promise.all([
    m("db/client.ts"),
    m("core/core.ts"),
    m("gateway/app.ts"),
    m("core/identity/bootstrap.ts"),
    m("log.ts"),
    m("lib/metrics.ts"),
    m("config.ts"),
  ]);
  const dir = mkdtempSync(join(tmpdir(), "portico-serve-path-"));
  dirs.push(dir);
  const dataDir = join(dir, "data");
  const database = await openDatabase({ dataDir });
  const logger = createLogger({ level: "info", destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  const boot = await bootstrap(database.db, []);
  const config = loadConfig({
    PORTICO_DATA_DIR: dataDir,
    HOST: "127.0.0.1",
    PORT: "0",
    PORTICO_GRPC_PORT: "0",
    PORTICO_EMBEDDED_HOST: "false",
    PORTICO_PROVIDER_GROQ_BASE_URL: `${fake.url}/v1`,
  });
  const metrics = createMetrics();
  const core = await createCore({ database, config, logger, metrics });
  const gateway = await buildGateway({ transport: core.createInMemoryTransport(), logger, metrics, bodyLimitBytes: config.bodyLimitBytes, brand: config.brand });
  await gateway.ready();
  const inject = gateway.inject.bind(gateway) as unknown as Inject;
  const byok = await inject({
    method: "POST",
    url: "/api/v1/byok",
    headers: { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" },
    payload: JSON.stringify({ provider: "groq", key: "gsk-bench" }),
  });
  if (byok.statusCode !== 200) throw new Error(`BYOK: ${byok.statusCode} ${byok.body}`);
  const chatHeaders = { authorization: `Bearer ${boot.api_key}`, "content-type": "application/json" };
  const payload = JSON.stringify({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }], stream: false });
  const keyHeaders = { authorization: `Bearer ${boot.api_key}` };
  return {
    async chat() {
      const r = await inject({ method: "POST", url: "/api/v1/chat/completions", headers: chatHeaders, payload });
      if (r.statusCode !== 200) throw new Error(`chat: ${r.statusCode} ${r.body}`);
    },
    async key() {
      const r = await inject({ method: "GET", url: "/api/v1/key", headers: keyHeaders });
      if (r.statusCode !== 200) throw new Error(`key: ${r.statusCode} ${r.body}`);
    },
    async close() {
      await gateway.close();
      await core.close();
      await database.close();
    },
  };
}

/** CPU µs per request of `n` requests, `concurrency` in flight. */
async function run(send: () => Promise<void>, n: number): Promise<number> {
  let left = n;
  const lane = async () => {
    while (left-- > 0) await send();
  };
  const t0 = cpuUs();
  await Promise.all(Array.from({ length: concurrency }, lane));
  return (cpuUs() - t0) / n;
}

async function measure(s: Stack): Promise<{ chat: number; key: number }> {
  const best = { chat: Infinity, key: Infinity };
  for (let r = 0; r < repeats; r++) {
    for (const name of (only ? [only] : ["chat", "key"]) as Array<"chat" | "key">) {
      await run(s[name], Math.min(500, requests / 4));
      best[name] = Math.min(best[name], await run(s[name], requests));
    }
  }
  return best;
}

const trees: Array<[string, Stack]> = [["this tree", await stackAt(resolve(import.meta.dirname, ".."))]];
if (base) trees.push([`base (${base})`, await stackAt(base)]);
console.log(`load average at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}; ${requests} requests per round, c=${concurrency}, best of ${repeats}\n`);
console.log("| pair | tree | chat completion (non-streamed) CPU µs/request | GET /api/v1/key CPU µs/request |");
console.log("|---|---|---:|---:|");
for (let pair = 1; pair <= pairs; pair++) {
  for (const [name, s] of pair % 2 === 1 ? trees : [...trees].reverse()) {
    const r = await measure(s);
    console.log(`| ${pair} | ${name} | ${r.chat.toFixed(1)} | ${r.key.toFixed(1)} |`);
  }
}
console.log(`\nload average at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
for (const [, s] of trees) await s.close();
await fake.close();
for (const d of dirs) rmSync(d, { recursive: true, force: true });
