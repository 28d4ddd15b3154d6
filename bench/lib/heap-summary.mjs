#!/usr/bin/env node
/**
 * Bytes allocated per function (self) and per file of one or two sampling heap profiles (`.heapprofile`, e.g.
 * `bench/tracing-cost.ts --heap-sample <dir>`), per unit of work; with two, A, B and A − B:
 *
 *   node bench/lib/heap-summary.mjs <a.heapprofile> [<b.heapprofile>] --units-a N [--units-b N] [--top 40] [--stack RE]
 *
 * `--stack RE`: also the allocation stacks (five frames) of the functions matching RE, A's.
 */
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const argOf = (name) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const files = args.filter((a, i) => !a.startsWith("--") && !(i > 0 && args[i - 1].startsWith("--")));
const top = Number(argOf("top") ?? 40);
const units = [Number(argOf("units-a") ?? 1), Number(argOf("units-b") ?? 1)];
const short = (url) => url.replace(/^file:\/\//, "").replace(/^.*\/node_modules\//, "~/").replace(/^.*?\/(src|bench|test|dist)\//, "$1/");
const label = (cf) => `${cf.functionName || "(anonymous)"} ${cf.url ? `${short(cf.url)}:${cf.lineNumber + 1}` : ""}`.trim();
const fileOf = (cf) => (cf.url ? short(cf.url).replace(/^~\/(@[^/]+\/[^/]+|[^/]+)\/.*/, "~/$1") : cf.functionName || "(native)");

function load(file) {
  const { head } = JSON.parse(readFileSync(file, "utf8"));
  const fn = new Map();
  const byFile = new Map();
  const stacks = new Map();
  let total = 0;
  const stackRe = argOf("stack") ? new RegExp(argOf("stack")) : undefined;
  const walk = (n, path) => {
    const here = [label(n.callFrame), ...path];
    if (n.selfSize) {
      total += n.selfSize;
      fn.set(here[0], (fn.get(here[0]) ?? 0) + n.selfSize);
      const f = fileOf(n.callFrame);
      byFile.set(f, (byFile.get(f) ?? 0) + n.selfSize);
      if (stackRe?.test(here[0])) {
        const k = here.slice(0, 5).join(" < ");
        stacks.set(k, (stacks.get(k) ?? 0) + n.selfSize);
      }
    }
    for (const c of n.children ?? []) walk(c, here);
  };
  walk(head, []);
  return { fn, byFile, stacks, total };
}

const ps = files.map(load);
const per = (p, i, v) => v / units[i];
const show = (title, get) => {
  console.log(`\n${title} (bytes per unit${ps.length > 1 ? ": A, B, A − B; by |A − B|" : ""}):`);
  const keys = new Set(ps.flatMap((p) => [...get(p).keys()]));
  const rows = [...keys].map((k) => [k, ...ps.map((p, i) => per(p, i, get(p).get(k) ?? 0))]);
  const score = (r) => (ps.length > 1 ? Math.abs(r[1] - r[2]) : r[1]);
  for (const r of rows.sort((a, b) => score(b) - score(a)).slice(0, top)) {
    const nums = ps.length > 1 ? [r[1], r[2], r[1] - r[2]] : [r[1]];
    console.log(`${nums.map((x) => x.toFixed(0).padStart(8)).join(" ")}  ${r[0]}`);
  }
};
console.log(`total bytes per unit: ${ps.map((p, i) => per(p, i, p.total).toFixed(0)).join(", ")}`);
show("by file", (p) => p.byFile);
show("by function", (p) => p.fn);
if (argOf("stack")) {
  console.log(`\nstacks of ${argOf("stack")} (A):`);
  for (const [k, v] of [...ps[0].stacks].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${per(ps[0], 0, v).toFixed(0).padStart(8)}  ${k}`);
}
