/**
 * Preset creation benchmark (issue #3). Starts, in this process, the real stack on a fresh SQLite
 * database (core + gRPC listener + gateway over the in-memory transport, as `portico serve` runs)
 * and a bare Fastify route that parses the same body and answers 200. Load comes from a worker thread
 * (its own event loop) with keep-alive connections: HTTP/1.1 through an http.Agent, gRPC through one
 * connect-node HTTP/2 transport. Each scenario runs a warm-up and then a fixed duration.
 *
 *   node bin/run-ts.mjs bench/presets-create.ts [--seconds 5] [--warmup 1] [--only "gateway POST"] [--postgres [URL]]
 *
 * `--postgres` runs on a fresh PostgreSQL database created on URL's server (default
 * postgresql://postgres@127.0.0.1:5432/postgres) and dropped at the end.
 *
 * Prints a Markdown table and the gateway/bare throughput ratios.
 */
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { Writable } from "node:stream";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, cpus } from "node:os";
import { join } from "node:path";
import http from "node:http";
import { runInWorker } from "./lib/worker.js";
import { closedLoop } from "./lib/closed-loop.js";

interface Scenario {
  name: string;
  kind: "http" | "grpc";
  url: string;
  concurrency: number;
  /** One slug per connection (false) or every connection on one slug (true). */
  hotSlug: boolean;
}

interface Result {
  name: string;
  concurrency: number;
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  max: number;
}

const BODY = {
  messages: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "Hello!" },
  ],
  model: "openai/gpt-4o",
  temperature: 0.7,
  top_p: 0.9,
  stop: ["\n\n"],
  provider: { only: ["OpenAI"], sort: "price", allow_fallbacks: false },
  plugins: [{ id: "web", max_results: 3 }],
  stream: false,
};

/** A new empty database on the server of `adminUrl`, and how to drop it. */
async function createPgDatabase(adminUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const { default: pg } = await import("pg");
  const name = `portico_bench_${process.pid}_${Date.now()}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return { url: u.toString(), drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}


async function main(): Promise<void> {
  const seconds = arg("seconds", 5);
  const warmup = arg("warmup", 1);
  const [{ openDatabase }, { createCore }, { startCoreServer }, { buildGateway }, { bootstrap }, { createLogger }, { createMetrics }, { loadConfig }, { fastify }] =
    await Promise.all([
      import("../src/db/client.js"),
      import("../src/core/core.js"),
      import("../src/core/server.js"),
      import("../src/gateway/app.js"),
      import("../src/core/identity/bootstrap.js"),
      import("../src/log.js"),
      import("../src/lib/metrics.js"),
      import("../src/config.js"),
      import("fastify"),
    ]);

  const dir = mkdtempSync(join(tmpdir(), "portico-bench-"));
  const pgAt = process.argv.indexOf("--postgres");
  const pgDb = pgAt > 0 ? await createPgDatabase(process.argv[pgAt + 1]?.startsWith("postgres") ? process.argv[pgAt + 1]! : "postgresql://postgres@127.0.0.1:5432/postgres") : undefined;
  const database = await openDatabase({ dataDir: join(dir, "data"), databaseUrl: pgDb?.url });
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const logger = createLogger({ level: "warn", destination: sink });
  const config = loadConfig({ PORTICO_DATA_DIR: join(dir, "data"), HOST: "127.0.0.1", PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_EMBEDDED_HOST: "false" });
  const metrics = createMetrics();
  const core = await createCore({ database, config, logger, metrics });
  const coreServer = await startCoreServer(core, { host: "127.0.0.1", port: 0, logger });
  const gateway = await buildGateway({ transport: core.createInMemoryTransport(), logger, metrics, bodyLimitBytes: config.bodyLimitBytes, brand: config.brand });
  await gateway.listen({ host: "127.0.0.1", port: 0 });
  const gwPort = (gateway.server.address() as { port: number }).port;
  const boot = await bootstrap(database.db, []);

  const bare = fastify({ bodyLimit: config.bodyLimitBytes });
  bare.post("/api/v1/bare/:slug/chat/completions", async (req) => {
    const body = req.body as { messages?: unknown };
    return { ok: Array.isArray(body.messages) };
  });
  await bare.listen({ host: "127.0.0.1", port: 0 });
  const barePort = (bare.server.address() as { port: number }).port;

  const scenarios: Scenario[] = [];
  for (const concurrency of [1, 32]) {
    scenarios.push({ name: "bare Fastify route", kind: "http", url: `http://127.0.0.1:${barePort}/api/v1/bare`, concurrency, hotSlug: false });
    scenarios.push({ name: "gateway POST /presets/{slug}/chat/completions", kind: "http", url: `http://127.0.0.1:${gwPort}/api/v1/presets`, concurrency, hotSlug: false });
    scenarios.push({ name: "core gRPC CreatePresetVersion", kind: "grpc", url: coreServer.url, concurrency, hotSlug: false });
  }
  scenarios.push({ name: "gateway, all connections on one slug", kind: "http", url: `http://127.0.0.1:${gwPort}/api/v1/presets`, concurrency: 32, hotSlug: true });

  const onlyIdx = process.argv.indexOf("--only");
  const only = onlyIdx > 0 ? process.argv[onlyIdx + 1] : undefined;
  const results: Result[] = [];
  for (const [i, s] of scenarios.entries()) {
    if (only && !`${s.name} c=${s.concurrency}`.includes(only)) continue;
    const r = await runInWorker<Result>(import.meta.url, { scenario: s, key: boot.management_key!, seconds, warmup, slugPrefix: `b${i}` });
    results.push(r);
    console.error(`${s.name} c=${s.concurrency}: ${r.rps.toFixed(0)} req/s p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)} ms errors ${r.errors}`);
  }

  const versions = await database.db.presetVersion.count();
  await bare.close();
  await gateway.close();
  await coreServer.close();
  await core.close();
  await database.close();
  await pgDb?.drop();
  rmSync(dir, { recursive: true, force: true });

  console.log(`\nNode ${process.version}, ${cpus().length} CPU(s) (${cpus()[0]?.model ?? "?"}), ${pgDb ? "PostgreSQL" : "SQLite"}, ${seconds}s per scenario after ${warmup}s warm-up; ${versions} preset versions written.\n`);
  console.log("| scenario | concurrency | req/s | p50 ms | p99 ms | max ms | errors |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const r of results) {
    console.log(`| ${r.name} | ${r.concurrency} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.max.toFixed(2)} | ${r.errors} |`);
  }
  for (const c of [1, 32]) {
    const bareR = results.find((r) => r.name.startsWith("bare") && r.concurrency === c);
    const gw = results.find((r) => r.name.startsWith("gateway POST") && r.concurrency === c);
    const grpc = results.find((r) => r.name.startsWith("core gRPC") && r.concurrency === c);
    if (!bareR || !gw || !grpc) continue;
    console.log(`\nconcurrency ${c}: gateway/bare = ${(gw.rps / bareR.rps).toFixed(3)}, gRPC/bare = ${(grpc.rps / bareR.rps).toFixed(3)}`);
  }
}


async function worker(): Promise<void> {
  const { scenario, key, seconds, warmup, slugPrefix } = workerData as {
    scenario: Scenario;
    key: string;
    seconds: number;
    warmup: number;
    slugPrefix: string;
  };
  const payload = JSON.stringify(BODY);
  let send: (slug: string) => Promise<boolean>;
  let close = async () => {};

  if (scenario.kind === "http") {
    const agent = new http.Agent({ keepAlive: true, maxSockets: scenario.concurrency });
    const target = new URL(scenario.url);
    send = (slug) =>
      new Promise((resolve) => {
        const req = http.request(
          {
            agent,
            host: target.hostname,
            port: target.port,
            method: "POST",
            path: `${target.pathname}/${slug}/chat/completions`,
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
          },
          (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode === 200));
          },
        );
        req.on("error", () => resolve(false));
        req.end(payload);
      });
    close = async () => agent.destroy();
  } else {
    const [{ createClient }, { createGrpcTransport }, { PresetsService }] = await Promise.all([
      import("@connectrpc/connect"),
      import("@connectrpc/connect-node"),
      import("../src/gen/portico/presets/v1/presets_service_pb.js"),
    ]);
    const client = createClient(PresetsService, createGrpcTransport({ baseUrl: scenario.url }));
    const headers = { authorization: `Bearer ${key}` };
    const body = JSON.parse(payload) as Record<string, never>;
    send = (slug) =>
      client.createPresetVersion({ slug, request: { case: "chatRequestJson", value: body } }, { headers }).then(
        () => true,
        () => false,
      );
  }

  const figures = await closedLoop({
    concurrency: scenario.concurrency,
    warmupSeconds: warmup,
    seconds,
    send: (conn) => send(scenario.hotSlug ? `${slugPrefix}-hot` : `${slugPrefix}-c${conn}`),
  });
  await close();
  const result: Result = { name: scenario.name, concurrency: scenario.concurrency, ...figures };
  parentPort!.postMessage(result);
}

if (isMainThread) {
  await main();
} else {
  await worker();
}
