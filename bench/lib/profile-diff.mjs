#!/usr/bin/env node
/**
 * Two V8 `.cpuprofile`s of the same work with one thing changed (e.g. tracing on and off), compared per unit of work:
 * self time per function, per file (packages folded) and per area, each as µs per unit in A, in B, and A − B.
 *
 *   node bench/lib/profile-diff.mjs <a.cpuprofile> <b.cpuprofile> --units-a N --units-b N
 *       [--from-a S --to-a S --from-b S --to-b S] [--top 40] [--area name=RE …]
 *
 * `--units-*`: how many units (requests) each window did; `--from-*`/`--to-*`: the window, in seconds after the
 * profile's start (bench/tracing-cost.ts prints `MEASURED FROM`/`TO` with `--child-log`). "(idle)" is left out.
 * Areas: the first `--area name=RE` (over "function url") that matches a function; the built-in ones after them.
 *
 *   node bench/lib/profile-diff.mjs <one.cpuprofile> --windows <child log> --per-window N [--a on --b off]
 *
 * One profile of a process that took turns: A is the samples inside the log's `WINDOW a <from µs> <to µs>` lines
 * (bench/tracing-cost.ts `--child-log`; the monotonic clock, as the profile's timestamps), B those inside `WINDOW b`
 * lines; units are `--per-window` times the windows. Both modes then see the same load.
 *
 * A sample's time delta longer than `--max-delta` µs (default 5× the profile's median delta) is cut to it: on a loaded
 * machine the profiler's thread is not scheduled for tens of ms at times, and the whole gap is charged to whatever
 * frame the next sample finds (an 80 ms "isAtEnd" in one run). The share of the time cut is printed.
 */
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const argOf = (name) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const positional = args.filter((a, i) => !a.startsWith("--") && !(i > 0 && args[i - 1].startsWith("--")));
const windowLog = argOf("windows");
const [fileA, fileB] = windowLog ? [positional[0], positional[0]] : positional;
const windowsOf = (mode) =>
  windowLog
    ? readFileSync(windowLog, "utf8")
        .split("\n")
        .filter((l) => l.startsWith(`WINDOW ${mode} `))
        .map((l) => l.split(" ").slice(2).map(Number))
    : undefined;
const winA = windowsOf(argOf("a") ?? "on");
const winB = windowsOf(argOf("b") ?? "off");
if (!fileA || !fileB) {
  console.error("usage: profile-diff.mjs <a.cpuprofile> <b.cpuprofile> --units-a N --units-b N [--from-a S --to-a S --from-b S --to-b S]");
  process.exit(2);
}
const top = Number(argOf("top") ?? 40);
const userAreas = args.flatMap((a, i) => (a === "--area" ? [args[i + 1]] : [])).map((s) => {
  const eq = s.indexOf("=");
  return [s.slice(0, eq), new RegExp(s.slice(eq + 1))];
});
const areas = [
  ...userAreas,
  ["GC", /^\(garbage collector\)/],
  ["(program)", /^\(program\)/],
  ["tracing: lib/tracing.ts", /\/(src|dist)\/lib\/tracing\.[jt]s/],
  ["tracing: encoder", /otlp-trace-encoder/],
  ["tracing: interceptor", /tracing-interceptor/],
  ["tracing: trace stage", /pipeline\/trace\.[jt]s/],
  ["tracing: ids", /trace-ids/],
  ["@opentelemetry/sdk-trace", /@opentelemetry\/sdk-trace/],
  ["@opentelemetry/core", /@opentelemetry\/core\//],
  ["@opentelemetry/api", /@opentelemetry\/api\//],
  ["@opentelemetry/otlp-exporter-base", /@opentelemetry\/otlp-exporter-base/],
  ["@opentelemetry/other", /@opentelemetry\//],
  ["fastify", /node_modules\/fastify\//],
  ["light-my-request", /light-my-request/],
  ["find-my-way", /find-my-way/],
  ["undici (package)", /node_modules\/undici\//],
  ["@connectrpc", /@connectrpc/],
  ["pino", /node_modules\/(pino|sonic-boom|fast-redact|thread-stream)/],
  ["portico core", /\/(src|dist)\/core\//],
  ["portico gateway", /\/(src|dist)\/gateway\//],
  ["portico lib", /\/(src|dist)\/lib\//],
  ["portico other", /\/(src|dist)\//],
  ["bench", /\/bench\//],
  ["node: http/net/stream", /node:(_http|http|net|stream|internal\/(http|streams|stream_base|net|dns))/],
  ["node: timers", /node:internal\/timers|node:timers/],
  ["node: async_hooks/microtasks/process", /node:internal\/(async_hooks|process\/task_queues|process\/promises)/],
  ["node: other", /node:/],
  ["other node_modules", /node_modules/],
  ["native/builtins (no url)", /^[^ ]* ?$/],
  ["other", /./],
];
const short = (url) => url.replace(/^file:\/\//, "").replace(/^.*\/node_modules\//, "~/").replace(/^.*?\/(src|dist|bench|test)\//, "$1/");

function load(file, from, to, windows) {
  const profile = JSON.parse(readFileSync(file, "utf8"));
  let abs = profile.startTime;
  const sorted = [...profile.timeDeltas].sort((x, y) => x - y);
  const cap = Number(argOf("max-delta") ?? 5 * sorted[sorted.length >> 1]);
  let cut = 0;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let at = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    abs += profile.timeDeltas[i] ?? 0;
    if (at < from * 1e6 || at > to * 1e6) continue;
    if (windows && !windows.some(([w0, w1]) => abs >= w0 && abs <= w1)) continue;
    const id = profile.samples[i];
    const d = profile.timeDeltas[i] ?? 0;
    if (d > cap) cut += d - cap;
    self.set(id, (self.get(id) ?? 0) + Math.min(d, cap));
  }
  const fn = new Map();
  const files = new Map();
  const area = new Map();
  let busy = 0;
  for (const [id, us] of self) {
    const n = byId.get(id);
    const name = n.callFrame.functionName || "(anonymous)";
    if (name === "(idle)") continue;
    busy += us;
    const url = n.callFrame.url ?? "";
    const l = `${name} ${url ? `${short(url)}:${n.callFrame.lineNumber + 1}` : ""}`.trim();
    fn.set(l, (fn.get(l) ?? 0) + us);
    const f = url ? short(url).replace(/^~\/(@[^/]+\/[^/]+|[^/]+)\/.*/, "~/$1") : name;
    files.set(f, (files.get(f) ?? 0) + us);
    const key = `${name} ${url}`;
    const a = areas.find(([, re]) => re.test(key))[0];
    area.set(a, (area.get(a) ?? 0) + us);
  }
  console.log(`${file}: deltas capped at ${cap} µs, ${(cut / 1000).toFixed(0)} ms cut (${((100 * cut) / (busy + cut)).toFixed(1)} % of the busy time before the cut)`);
  return { fn, files, area, busy };
}

const a = load(fileA, Number(argOf("from-a") ?? 0), Number(argOf("to-a") ?? Infinity), winA);
const b = load(fileB, Number(argOf("from-b") ?? 0), Number(argOf("to-b") ?? Infinity), winB);
const perWindow = Number(argOf("per-window") ?? 1);
const ua = winA ? perWindow * winA.length : Number(argOf("units-a") ?? 1);
const ub = winB ? perWindow * winB.length : Number(argOf("units-b") ?? 1);
if (winA) console.log(`windows: A ${winA.length}, B ${winB.length}`);
const row = (l, x, y) => `${(x / ua).toFixed(2).padStart(9)} ${(y / ub).toFixed(2).padStart(9)} ${(x / ua - y / ub).toFixed(2).padStart(9)}  ${l}`;
const table = (title, ma, mb, n) => {
  console.log(`\n${title} (µs per unit: A, B, A − B; by |A − B|):`);
  const keys = new Set([...ma.keys(), ...mb.keys()]);
  const rows = [...keys].map((k) => [k, ma.get(k) ?? 0, mb.get(k) ?? 0]).sort((p, q) => Math.abs(q[1] / ua - q[2] / ub) - Math.abs(p[1] / ua - p[2] / ub));
  for (const [k, x, y] of rows.slice(0, n)) console.log(row(k, x, y));
};
console.log(`busy µs per unit: A ${(a.busy / ua).toFixed(2)}, B ${(b.busy / ub).toFixed(2)}, A − B ${(a.busy / ua - b.busy / ub).toFixed(2)}`);
table("by area", a.area, b.area, 100);
table("by file", a.files, b.files, top);
table("by function", a.fn, b.fn, top);
