#!/usr/bin/env node
/**
 * Self time per function (and per file) of a V8 `.cpuprofile` (`node --cpu-prof`):
 *
 *   node bench/lib/profile-summary.mjs <file.cpuprofile> [--top 40] [--match <regexp over url or name>] [--from S] [--to S]
 *
 * Samples are weighted by their time deltas (share of the busy time, then ms); "(idle)" is left out of the shares (a loaded machine's profile is
 * mostly idle). `--match` also prints, for the matching functions, their total (self + callees) time. `--from`/`--to`:
 * only the samples taken that many seconds after the profile's start (e.g. one scenario of a bench that runs several).
 */
import { readFileSync } from "node:fs";

const file = process.argv[2];
if (!file) {
  console.error("usage: profile-summary.mjs <file.cpuprofile> [--top N] [--match RE]");
  process.exit(2);
}
const argOf = (name) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const top = Number(argOf("top") ?? 40);
const match = argOf("match") ? new RegExp(argOf("match")) : undefined;
const profile = JSON.parse(readFileSync(file, "utf8"));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const from = Number(argOf("from") ?? 0) * 1e6;
const to = argOf("to") === undefined ? Infinity : Number(argOf("to")) * 1e6;
const self = new Map();
let at = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  at += profile.timeDeltas[i] ?? 0;
  if (at < from || at > to) continue;
  self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
const short = (url) => url.replace(/^file:\/\//, "").replace(/^.*\/node_modules\//, "~/").replace(/^.*?\/(src|bench|test)\//, "$1/");
const label = (n) => `${n.callFrame.functionName || "(anonymous)"} ${n.callFrame.url ? `${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}` : ""}`.trim();
let busy = 0;
const fn = new Map();
const files = new Map();
for (const [id, us] of self) {
  const n = byId.get(id);
  if (n.callFrame.functionName === "(idle)") continue;
  busy += us;
  const l = label(n);
  fn.set(l, (fn.get(l) ?? 0) + us);
  const f = n.callFrame.url ? short(n.callFrame.url).replace(/^~\/(@[^/]+\/[^/]+|[^/]+)\/.*/, "~/$1") : n.callFrame.functionName;
  files.set(f, (files.get(f) ?? 0) + us);
}
const pct = (us) => `${((100 * us) / busy).toFixed(1).padStart(5)} % ${(us / 1000).toFixed(0).padStart(6)} ms`;
console.log(`busy ${(busy / 1000).toFixed(0)} ms of ${((profile.endTime - profile.startTime) / 1000).toFixed(0)} ms\n\nself time by function:`);
for (const [l, us] of [...fn].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${l}`);
console.log("\nself time by file (packages folded):");
for (const [l, us] of [...files].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${l}`);
if (match) {
  // Total time: each sample counted once for every distinct matching function on its stack.
  const total = new Map();
  for (const [id, us] of self) {
    const seen = new Set();
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const n = byId.get(cur);
      const l = label(n);
      if (!seen.has(l) && match.test(l)) {
        seen.add(l);
        total.set(l, (total.get(l) ?? 0) + us);
      }
    }
  }
  console.log(`\ntotal time (self + callees) of functions matching ${match}:`);
  for (const [l, us] of [...total].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${l}`);
}
