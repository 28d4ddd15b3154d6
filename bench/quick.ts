/**
 * `npm run bench:quick`: short runs of the benchmarks behind issue 12's goals (and issue 11's relay figures), compared with the bounds in
 * bench/quick-thresholds.json; exits 1 when a figure regressed past its bound. Under two minutes on the
 * 2-core development machine. A new entry: add a probe below (command + how to read its figure) and its bound.
 *
 *   npm run bench:quick
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { resolve } from "node:path";

const root = resolve(import.meta.dirname, "..");
const thresholds = JSON.parse(readFileSync(resolve(import.meta.dirname, "quick-thresholds.json"), "utf8")) as Record<string, { min?: number; max?: number }>;

function run(args: string[]): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("close", (code) => (code === 0 ? done(out) : fail(new Error(`${args.join(" ")} exited ${code}\n${out.slice(-2000)}`))));
  });
}

/** The cells of the Markdown table row whose first cell starts with `name`. */
function row(out: string, name: string): string[] {
  const line = out.split("\n").find((l) => l.startsWith(`| ${name}`));
  if (!line) throw new Error(`no row "${name}" in:\n${out.slice(-1500)}`);
  return line.split("|").slice(1, -1).map((c) => c.trim());
}
const num = (cell: string) => Number(cell.replace(/[^0-9.]/g, ""));

interface Probe {
  name: string;
  args: string[];
  read(out: string): Record<string, number>;
}

const ts = (file: string, ...rest: string[]) => ["bin/run-ts.mjs", `bench/${file}`, ...rest];
const probes: Probe[] = [
  {
    name: "GET /api/v1/key from memory vs bare http (bench/key-lookup.ts)",
    args: ts("key-lookup.ts", "--seconds", "2", "--warmup", "1"),
    read: (out) => ({ key_cache_share_of_bare_http_pct: num(row(out, "GET /api/v1/key, key cache on")[5]!) }),
  },
  {
    name: "preset creation c=32 (bench/presets-create.ts)",
    args: ts("presets-create.ts", "--seconds", "2", "--warmup", "1", "--only", "gateway POST /presets/{slug}/chat/completions c=32"),
    read: (out) => {
      const r = row(out, "gateway POST /presets/{slug}/chat/completions");
      return { presets_create_c32_rps: num(r[2]!), presets_create_c32_p99_ms: num(r[4]!) };
    },
  },
  {
    name: "intern added time to first chunk (bench/interns-stream.ts)",
    args: ["--expose-gc", ...ts("interns-stream.ts", "--quick", "--only", "first chunk")],
    read: (out) => {
      const line = out.split("\n").find((l) => l.includes('"scenario":"first chunk'));
      if (!line) throw new Error(`no first-chunk row in:\n${out.slice(-1500)}`);
      return { intern_first_chunk_added_p50_ms: (JSON.parse(line) as { firstChunkAddedP50ms: number }).firstChunkAddedP50ms };
    },
  },
  {
    name: "chat completions relay (bench/chat-relay.ts)",
    args: ts("chat-relay.ts", "--seconds", "2", "--warmup", "1", "--rounds", "1", "--streams", "200"),
    read: (out) => {
      const share = num(/c=32 throughput, Portico \/ minimal relay: ([\d.]+) %/.exec(out)?.[1] ?? "NaN");
      // The second "| Portico |" row is the streams table: relay CPU per chunk, then bad and failed streams.
      const streams = out.split("\n").filter((l) => l.startsWith("| Portico |"))[1]?.split("|").slice(1, -1).map((c) => c.trim());
      if (!streams) throw new Error(`no streams row in:\n${out.slice(-1500)}`);
      return {
        chat_c32_share_of_minimal_relay_pct: share,
        chat_cpu_per_relayed_chunk_us: num(streams[4]!),
        chat_bad_or_failed_streams: num(streams[6]!) + num(streams[7]!),
      };
    },
  },
  {
    name: "chat hot path, serve with one worker and the split core + gateway beside the bare node:http relay (bench/chat-hot-path.ts)",
    args: ts("chat-hot-path.ts", "--targets", "bare,serve1,split", "--rounds", "1", "--seconds", "3", "--warmup", "1", "--rss-seconds", "10"),
    read: (out) => {
      const bare = row(out, "bare node:http relay");
      const serve = row(out, "Portico serve, 1 worker");
      const split = row(out, "Portico core + gateway over gRPC");
      // Columns: target, c=1, first chunk, c=32 req/s, % of bare, p99, CPU/request ms, CPU/chunk µs, bad, errors, RSS.
      return {
        chat_serve_cpu_per_request_x_bare: Math.round((100 * num(serve[6]!)) / num(bare[6]!)) / 100,
        chat_serve_c32_share_of_bare_pct: num(serve[4]!),
        chat_serve_cpu_per_chunk_us: num(serve[7]!),
        chat_serve_bad_streams_or_errors: num(serve[8]!) + num(serve[9]!),
        chat_serve_rss_after_c32_mb: num(serve[10]!),
        // Issue 24: the split path at most 1.5× the in-process CPU per request (both processes' CPU, same run). One
        // short round is too noisy to hold that bound (quick-thresholds.json says how noisy): its bound is looser.
        chat_split_cpu_per_request_x_serve: Math.round((100 * num(split[6]!)) / num(serve[6]!)) / 100,
        chat_split_bad_streams_or_errors: num(split[8]!) + num(split[9]!),
      };
    },
  },
  {
    name: "portico serve, one worker: restart and idle memory (bench/startup.ts)",
    args: ts("startup.ts", "--runs", "1", "--settle", "3", "--workers", "1"),
    read: (out) => ({
      serve_one_worker_restart_to_ready_ms: num(/restart to \/readyz: median (\d+)/.exec(out)?.[1] ?? "NaN"),
      serve_one_worker_idle_rss_mb: num(/idle RSS of the serving tree: median ([\d.]+)/.exec(out)?.[1] ?? "NaN"),
    }),
  },
];

const started = performance.now();
console.log(`bench:quick — load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
const results: Array<{ metric: string; value: number; bound: string; ok: boolean }> = [];
for (const probe of probes) {
  process.stdout.write(`… ${probe.name}\n`);
  const figures = probe.read(await run(probe.args));
  for (const [metric, value] of Object.entries(figures)) {
    const t = thresholds[metric] ?? {};
    const ok = Number.isFinite(value) && (t.min === undefined || value >= t.min) && (t.max === undefined || value <= t.max);
    results.push({ metric, value, bound: t.min !== undefined ? `≥ ${t.min}` : t.max !== undefined ? `≤ ${t.max}` : "—", ok });
  }
}
console.log("\n| metric | value | bound | |\n|---|---:|---:|---|");
for (const r of results) console.log(`| ${r.metric} | ${r.value} | ${r.bound} | ${r.ok ? "ok" : "REGRESSED"} |`);
console.log(`\n${((performance.now() - started) / 1000).toFixed(0)} s`);
if (results.some((r) => !r.ok)) process.exit(1);
