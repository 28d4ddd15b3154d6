/**
 * BYOK benchmark (issue #4). In this process: the real stack on a fresh SQLite database (core +
 * gateway over the in-memory transport, as `portico serve` runs). Load comes from a worker thread
 * (own event loop) over keep-alive HTTP/1.1 connections. Also measures the keyring alone (seal and
 * open of a 48-byte key) and master-key rotation throughput (rows re-encrypted per second).
 *
 *   node bin/run-ts.mjs bench/byok.ts [--seconds 5] [--warmup 1] [--rows 2000]
 */
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { Writable } from "node:stream";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, cpus } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import http from "node:http";
import { runInWorker } from "./lib/worker.js";

interface Scenario {
  name: string;
  method: "POST" | "GET" | "PATCH";
  path: string;
  body?: string;
  concurrency: number;
}
interface Result {
  name: string;
  concurrency: number;
  requests: number;
  errors: number;
  rps: number;
  p50: number;
  p99: number;
}

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const KEY = `sk-proj-${randomBytes(20).toString("hex")}`;

async function main(): Promise<void> {
  const seconds = arg("seconds", 5);
  const warmup = arg("warmup", 1);
  const rows = arg("rows", 2000);
  const [{ openDatabase }, { createCore }, { buildGateway }, { bootstrap }, { createLogger }, { createMetrics }, { loadConfig }, kr, rot] =
    await Promise.all([
      import("../src/db/client.js"),
      import("../src/core/core.js"),
      import("../src/gateway/app.js"),
      import("../src/core/identity/bootstrap.js"),
      import("../src/log.js"),
      import("../src/lib/metrics.js"),
      import("../src/config.js"),
      import("../src/core/byok/keyring.js"),
      import("../src/core/byok/rotation.js"),
    ]);
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-byok-"));
  const dataDir = join(dir, "data");
  const database = await openDatabase({ dataDir });
  const logger = createLogger({ level: "warn", destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  const config = loadConfig({ PORTICO_DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_EMBEDDED_HOST: "false" });
  const metrics = createMetrics();
  const core = await createCore({ database, config, logger, metrics });
  const gateway = await buildGateway({ transport: core.createInMemoryTransport(), logger, metrics, bodyLimitBytes: config.bodyLimitBytes, brand: config.brand });
  await gateway.listen({ host: "127.0.0.1", port: 0 });
  const port = (gateway.server.address() as { port: number }).port;
  const boot = await bootstrap(database.db, []);
  const base = `http://127.0.0.1:${port}/api/v1`;
  const first = await fetch(`${base}/byok`, {
    method: "POST",
    headers: { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" },
    body: JSON.stringify({ key: KEY, provider: "openai" }),
  }).then((r) => r.json() as Promise<{ data: { id: string } }>);

  const createBody = JSON.stringify({ key: KEY, provider: "openai", name: "bench", allowed_models: ["openai/gpt-4o"] });
  const scenarios: Scenario[] = [
    { name: "POST /byok (create: validate, seal, insert)", method: "POST", path: "/byok", body: createBody, concurrency: 1 },
    { name: "POST /byok (create: validate, seal, insert)", method: "POST", path: "/byok", body: createBody, concurrency: 16 },
    { name: "GET /byok/{id}", method: "GET", path: `/byok/${first.data.id}`, concurrency: 16 },
    { name: "GET /byok?limit=50", method: "GET", path: "/byok?limit=50", concurrency: 16 },
    { name: "PATCH /byok/{id} {key} (rotate key)", method: "PATCH", path: `/byok/${first.data.id}`, body: JSON.stringify({ key: KEY }), concurrency: 16 },
  ];
  const results: Result[] = [];
  for (const s of scenarios) {
    const r = await runInWorker<Result>(import.meta.url, { scenario: s, base, key: boot.management_key, seconds, warmup });
    results.push(r);
    console.error(`${s.name} c=${s.concurrency}: ${r.rps.toFixed(0)} req/s p50 ${r.p50.toFixed(2)} p99 ${r.p99.toFixed(2)} errors ${r.errors}`);
  }

  // Keyring alone.
  const ring = new kr.Keyring({ primaryId: "k1", keys: new Map([["k1", randomBytes(32)]]) });
  const plain = Buffer.from(KEY);
  const aad = Buffer.alloc(80, 1);
  let n = 0;
  let t0 = performance.now();
  let blob = ring.seal(plain, aad).blob;
  while (performance.now() - t0 < 1000) {
    blob = ring.seal(plain, aad).blob;
    n++;
  }
  const sealPerSec = n / ((performance.now() - t0) / 1000);
  n = 0;
  t0 = performance.now();
  while (performance.now() - t0 < 1000) {
    ring.open("k1", blob, aad);
    n++;
  }
  const openPerSec = n / ((performance.now() - t0) / 1000);

  // Rotation throughput: bring the table to `rows` live credentials, then re-encrypt all under a new primary.
  const live = await database.db.byokCredential.count({ where: { deletedAt: null } });
  for (let i = live; i < rows; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, rows - i) }, () =>
        fetch(`${base}/byok`, {
          method: "POST",
          headers: { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" },
          body: JSON.stringify({ key: KEY, provider: "groq" }),
        }).then((r) => r.arrayBuffer()),
      ),
    );
  }
  const total = await database.db.byokCredential.count({ where: { deletedAt: null } });
  const keyring = kr.loadKeyring({ masterKey: undefined, masterKeyFile: undefined, dataDir, production: false, refreshIntervalMs: 0 });
  await rot.promoteKey(database.db, keyring, "k-bench-new", () => randomBytes(32));
  t0 = performance.now();
  const re = await rot.reencryptCredentials(database.db, keyring, { batchSize: 100 });
  const rotSeconds = (performance.now() - t0) / 1000;

  await gateway.close();
  await core.close();
  await database.close();
  rmSync(dir, { recursive: true, force: true });

  console.log(`\nNode ${process.version}, ${cpus().length} CPU(s) (${cpus()[0]?.model ?? "?"}), SQLite, ${seconds}s per HTTP scenario after ${warmup}s warm-up.\n`);
  console.log("| scenario | concurrency | req/s | p50 ms | p99 ms | errors |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of results) console.log(`| ${r.name} | ${r.concurrency} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.errors} |`);
  console.log(`\nkeyring alone: seal ${sealPerSec.toFixed(0)}/s, open ${openPerSec.toFixed(0)}/s (AES-256-GCM, ${plain.length}-byte key, 80-byte AAD)`);
  console.log(`rotation: ${re.reencrypted} of ${total} credentials re-encrypted in ${rotSeconds.toFixed(2)} s = ${(re.reencrypted / rotSeconds).toFixed(0)} rows/s (batch 100, row-by-row compare-and-swap)`);
}


async function worker(): Promise<void> {
  const { scenario, base, key, seconds, warmup } = workerData as { scenario: Scenario; base: string; key: string; seconds: number; warmup: number };
  const agent = new http.Agent({ keepAlive: true, maxSockets: scenario.concurrency });
  const target = new URL(base + scenario.path);
  const headers: Record<string, string | number> = { authorization: `Bearer ${key}` };
  if (scenario.body) {
    headers["content-type"] = "application/json";
    headers["content-length"] = Buffer.byteLength(scenario.body);
  }
  const send = () =>
    new Promise<boolean>((resolve) => {
      const req = http.request(
        { agent, host: target.hostname, port: target.port, method: scenario.method, path: target.pathname + target.search, headers },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode === 200));
        },
      );
      req.on("error", () => resolve(false));
      req.end(scenario.body);
    });
  const run = async (ms: number, record: boolean) => {
    const latencies: number[] = [];
    let errors = 0;
    const end = performance.now() + ms;
    await Promise.all(
      Array.from({ length: scenario.concurrency }, async () => {
        while (performance.now() < end) {
          const t = performance.now();
          const ok = await send();
          if (record) latencies.push(performance.now() - t);
          if (!ok) errors++;
        }
      }),
    );
    return { latencies, errors };
  };
  await run(warmup * 1000, false);
  const { latencies, errors } = await run(seconds * 1000, true);
  latencies.sort((a, b) => a - b);
  agent.destroy();
  parentPort!.postMessage({
    name: scenario.name,
    concurrency: scenario.concurrency,
    requests: latencies.length,
    errors,
    rps: latencies.length / seconds,
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
  } satisfies Result);
}

if (isMainThread) await main();
else await worker();
