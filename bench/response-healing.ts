/**
 * Response healing (issue 30): the latency the `response-healing` plugin adds on a ~10 KB almost-JSON answer.
 *
 *   npm run -s build && node bin/run-ts.mjs bench/response-healing.ts [--requests 400] [--warmup 50] [--rounds 2]
 *       [--iterations 2000]
 *
 * A fake OpenAI-compatible provider (test/helpers/fake-upstreams/openai.ts, a process of its own) answers a ~10 KB
 * JSON object wrapped in a ```json fence with prose around it and a trailing comma (so it does not parse as is),
 * split into 100 content chunks when streamed. `portico serve` (compiled dist/, 1 worker, fresh SQLite, a BYOK
 * groq credential stored through the API, groq's base URL pointed at the fake) is driven at c=1 from a worker
 * thread, model `groq/llama-3.3-70b`, `response_format: {type: "json_object"}` in every request:
 * - non-streaming p50 / p99 latency with `plugins: [{id: "response-healing"}]` and without;
 * - streaming: time to the first `data:` event carrying content, and time to the end of the stream, p50 / p99,
 *   with and without the plugin (the plugin holds a JSON answer's text until the end to heal it);
 * - the in-process cost of healJson (src/core/chat/pipeline/plugins/json-heal.ts) on the same text, µs per call
 *   over `--iterations` calls after a warm-up, for json_object and for a json_schema target.
 * `--requests` per variant, split over `--rounds` rounds in which the four variants take turns. Answers are
 * checked: with the plugin the content must parse as JSON; errors and unhealed answers are counted.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { runInWorker } from "./lib/worker.js";
import { percentile } from "./lib/closed-loop.js";
import { createByok, logPath, spawnUntil, startServe, stop } from "./lib/processes.js";
import { flag, num } from "./lib/args.js";


/** The ~10 KB almost-JSON answer: prose, a ```json fence, a trailing comma before the closing bracket. */
export function almostJson(): string {
  const items = Array.from({ length: 45 }, (_, i) => ({
    id: i,
    name: `item number ${i}`,
    tags: ["alpha", "beta", "gamma"].map((t) => `${t}-${i}`),
    price: Math.round(i * 137.5) / 10,
    note: `A short description of item ${i}, long enough to look like a model's prose.`,
  }));
  const body = JSON.stringify({ items, count: items.length }, null, 1);
  // `]` of items → `],` is valid; put the trailing comma after the last item instead.
  const broken = body.replace(/\}\n \],\n "count"/, "},\n ],\n \"count\"");
  return `Here is the JSON you asked for:\n\n\`\`\`json\n${broken}\n\`\`\`\n\nLet me know if you need anything else.`;
}

/** `text` in `n` pieces of near-equal length. */
export function pieces(text: string, n: number): string[] {
  const size = Math.ceil(text.length / n);
  return Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));
}

interface Job {
  url: string;
  key: string;
  stream: boolean;
  heal: boolean;
  requests: number;
  warmup: number;
}
interface Result {
  /** non-streaming: total latency; streaming: time to first content event. */
  first: number[];
  total: number[];
  errors: number;
  /** Answers whose content did not parse as JSON (all of them without the plugin: the text is broken on purpose). */
  unhealed: number;
}

const VARIANTS = [
  { name: "non-streaming, no plugin", stream: false, heal: false },
  { name: "non-streaming, response-healing", stream: false, heal: true },
  { name: "streaming, no plugin", stream: true, heal: false },
  { name: "streaming, response-healing", stream: true, heal: true },
] as const;

async function main(): Promise<void> {
  const requests = num("requests", 400);
  const warmup = num("warmup", 50);
  const rounds = num("rounds", 2);
  const iterations = num("iterations", 2000);
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-heal-"));
  const children: ChildProcess[] = [];
  const loadStart = loadavg().map((l) => l.toFixed(2)).join(" ");
  try {
    const fake = await spawnUntil(["bin/run-ts.mjs", resolve(import.meta.dirname, "response-healing.ts"), "--role", "fake"], {}, logPath(dir, "fake"), (out) => /FAKE (\S+)/.exec(out)?.[1]);
    children.push(fake.child);
    const serve = await startServe({ dataDir: join(dir, "data"), logFile: logPath(dir, "serve"), env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${fake.value}/v1` } });
    children.push(serve.child);
    await createByok(serve.api, serve.management, { provider: "groq", key: "gsk-bench" });
    const url = `${serve.api}/chat/completions`;
    const results = VARIANTS.map((): Result => ({ first: [], total: [], errors: 0, unhealed: 0 }));
    for (const v of VARIANTS) await runInWorker<Result>(import.meta.url, { url, key: serve.apiKey, stream: v.stream, heal: v.heal, requests: 0, warmup } satisfies Job);
    for (let round = 0; round < rounds; round++) {
      for (const [i, v] of VARIANTS.entries()) {
        const r = await runInWorker<Result>(import.meta.url, { url, key: serve.apiKey, stream: v.stream, heal: v.heal, requests: Math.ceil(requests / rounds), warmup: 5 } satisfies Job);
        const acc = results[i]!;
        acc.first.push(...r.first);
        acc.total.push(...r.total);
        acc.errors += r.errors;
        acc.unhealed += r.unhealed;
      }
    }
    await stop(serve.child);

    // healJson in this process.
    const { healJson, createSchemaChecker } = await import("../src/core/chat/pipeline/plugins/json-heal.js");
    const text = almostJson();
    const checker = createSchemaChecker();
    const schema = { type: "object", required: ["items", "count"], properties: { count: { type: "integer" }, items: { type: "array", items: { type: "object", required: ["id", "name"], properties: { id: { type: "integer" }, name: { type: "string" }, tags: { type: "array", items: { type: "string" } } } } } } };
    const micro = (target: Parameters<typeof healJson>[1]) => {
      const check = healJson(text, target, checker);
      if (!check.valid || !check.healed) throw new Error(`healJson did not heal the bench text: ${JSON.stringify(check.errors)}`);
      for (let i = 0; i < Math.max(100, iterations / 10); i++) healJson(text, target, checker);
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < iterations; i++) healJson(text, target, checker);
      return Number(process.hrtime.bigint() - t0) / 1e3 / iterations;
    };
    const objectUs = micro({ kind: "object" });
    const schemaUs = micro({ kind: "schema", schema });

    const p = (xs: number[], q: number) => percentile([...xs].sort((a, b) => a - b), q);
    const f = (x: number) => (Number.isNaN(x) ? "—" : x.toFixed(2));
    console.log(
      `\nNode ${process.version}, ${cpus().length} CPU(s); answer ${text.length} bytes in ${pieces(text, 100).length} chunks; ${requests} requests per variant at c=1 over ${rounds} round(s) after ${warmup} warm-up requests each; load average at start ${loadStart}, at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}.\n`,
    );
    console.log("| variant | requests | first content p50 ms | first content p99 ms | total p50 ms | total p99 ms | errors | not JSON |");
    console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (const [i, v] of VARIANTS.entries()) {
      const r = results[i]!;
      console.log(`| ${v.name} | ${r.total.length} | ${v.stream ? f(p(r.first, 50)) : "—"} | ${v.stream ? f(p(r.first, 99)) : "—"} | ${f(p(r.total, 50))} | ${f(p(r.total, 99))} | ${r.errors} | ${r.unhealed} |`);
    }
    const sign = (x: number) => `${x >= 0 ? "+" : ""}${f(x)}`;
    const added = (a: number, b: number) => `${sign(p(results[b]!.total, 50) - p(results[a]!.total, 50))} ms p50, ${sign(p(results[b]!.total, 99) - p(results[a]!.total, 99))} ms p99`;
    console.log(`\nAdded by response-healing: non-streaming ${added(0, 1)}; streaming total ${added(2, 3)}; streaming first content ${sign(p(results[3]!.first, 50) - p(results[2]!.first, 50))} ms p50.\n`);
    console.log("| healJson in process | µs per call |");
    console.log("|---|---:|");
    console.log(`| json_object (${text.length} bytes: fence cut, trailing comma repaired) | ${objectUs.toFixed(1)} |`);
    console.log(`| json_schema (same text, ajv check) | ${schemaUs.toFixed(1)} |`);
  } finally {
    for (const c of children.reverse()) await stop(c);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function fakeRole(): Promise<void> {
  const { startFakeOpenAI } = await import("../test/helpers/fake-upstreams/openai.js");
  const text = pieces(almostJson(), 100);
  const fake = await startFakeOpenAI({ text, finish: "stop", usage: { input: 40, output: 2500 } });
  console.log(`FAKE ${fake.url}`);
  process.once("SIGTERM", () => void fake.close().then(() => process.exit(0)));
}

/** Load worker: `warmup` then `requests` requests one after the other (c=1). */
async function worker(): Promise<void> {
  const job = workerData as Job;
  const target = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const payload = JSON.stringify({
    model: "groq/llama-3.3-70b",
    messages: [{ role: "user", content: "List the items as JSON." }],
    response_format: { type: "json_object" },
    stream: job.stream,
    ...(job.heal ? { plugins: [{ id: "response-healing" }] } : {}),
  });
  const result: Result = { first: [], total: [], errors: 0, unhealed: 0 };
  const once = () =>
    new Promise<{ ok: boolean; first: number; total: number; json: boolean }>((done) => {
      const t0 = process.hrtime.bigint();
      const ms = () => Number(process.hrtime.bigint() - t0) / 1e6;
      const req = http.request(
        { agent, host: target.hostname, port: target.port, path: target.pathname, method: "POST", headers: { authorization: `Bearer ${job.key}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) } },
        (res) => {
          let first = NaN;
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => {
            body += d;
            // First SSE event with non-empty content (a cheap test; the full parse happens at the end).
            if (job.stream && Number.isNaN(first) && /"content":"[^"]/.test(body)) first = ms();
          });
          res.on("end", () => {
            const total = ms();
            let content = "";
            try {
              if (job.stream) {
                for (const event of body.split("\n\n")) {
                  const data = event.split("\n").find((l) => l.startsWith("data: "))?.slice(6);
                  if (data === undefined || data === "[DONE]") continue;
                  content += JSON.parse(data).choices?.[0]?.delta?.content ?? "";
                }
              } else content = JSON.parse(body).choices?.[0]?.message?.content ?? "";
            } catch {
              // counted as not JSON below
            }
            let json = true;
            try {
              JSON.parse(content);
            } catch {
              json = false;
            }
            done({ ok: res.statusCode === 200, first, total, json });
          });
        },
      );
      req.on("error", () => done({ ok: false, first: NaN, total: ms(), json: false }));
      req.end(payload);
    });
  for (let i = 0; i < job.warmup; i++) await once();
  for (let i = 0; i < job.requests; i++) {
    const r = await once();
    if (!r.ok) result.errors++;
    if (!r.json) result.unhealed++;
    result.first.push(r.first);
    result.total.push(r.total);
  }
  agent.destroy();
  parentPort!.postMessage(result);
}

const role = flag("role");
if (!isMainThread) await worker();
else if (role === "fake") await fakeRole();
else await main();
