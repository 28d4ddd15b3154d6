/**
 * The chat path's copies that a spread made and then extended (bench/README.md, "Spreads that add a key"): on
 * Node 20's V8 an object literal that starts with a spread and then adds a key the source lacks gets a hidden class
 * of its own every time. For each site, the old expression against the new one (src/lib/copy.ts), on the objects a
 * request makes, then `JSON.stringify` where the path serialises the result (the attempts log of the generation
 * record, the upstream body). CPU ns per operation, the two taking turns, best of `--rounds`.
 *
 *   node bin/run-ts.mjs bench/spread-copies.ts [--ops 200000] [--rounds 5]
 */
import { loadavg } from "node:os";
import { copyOf } from "../src/lib/copy.js";

const flag = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const ops = Number(flag("ops") ?? 200_000);
const rounds = Number(flag("rounds") ?? 5);
const cpuNs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
};

const attempt = { provider: "groq", requestedModel: "groq/llama-3.3-70b", credentialSource: "byok" as const };
const entryOf = (a: typeof attempt) => ({ provider: a.provider, model: a.requestedModel, credential_source: a.credentialSource });
let slept: number | undefined;
const upstreamCall = () => ({ model: "llama-3.3-70b", body: { model: "groq/llama-3.3-70b", messages: [] }, baseUrl: "http://127.0.0.1/v1", apiKey: "gsk-x", signal: null as unknown });
const usageText = JSON.stringify({ prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 });

const sites: Array<{ name: string; old: () => unknown; now: () => unknown }> = [
  {
    name: "attempt log entry + JSON.stringify (execute, record)",
    old: () => JSON.stringify([{ ...entryOf(attempt), status: 200, reason: "served", duration_ms: 3, ...(slept !== undefined ? { backoff_ms: slept } : {}) }]),
    now: () => {
      const e: Record<string, unknown> = { provider: attempt.provider, model: attempt.requestedModel, credential_source: attempt.credentialSource, status: 200, reason: "served", duration_ms: 3 };
      if (slept !== undefined) e.backoff_ms = slept;
      return JSON.stringify([e]);
    },
  },
  {
    name: "attempt's upstream call (execute)",
    old: () => ({ ...upstreamCall(), signal: 1, firstByteTimeoutMs: 60_000 }),
    now: () => {
      const c = copyOf(upstreamCall()) as Record<string, unknown>;
      c.signal = 1;
      c.firstByteTimeoutMs = 60_000;
      return c;
    },
  },
  {
    name: "priced usage (cost stage)",
    old: () => ({ ...(JSON.parse(usageText) as object), cost: 0, is_byok: true, cost_details: { upstream_inference_cost: 1 } }),
    now: () => {
      const u = copyOf(JSON.parse(usageText) as object) as Record<string, unknown>;
      u.cost = 0;
      u.is_byok = true;
      u.cost_details = { upstream_inference_cost: 1 };
      return u;
    },
  },
];

console.log(`Node ${process.version}; ${ops} operations per round, best of ${rounds}; load average at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}\n`);
console.log("| site | old ns/op | new ns/op |");
console.log("|---|---:|---:|");
for (const s of sites) {
  if (JSON.stringify(s.old()) !== JSON.stringify(s.now())) throw new Error(`${s.name}: the two differ`);
  const best = { old: Infinity, now: Infinity };
  for (let r = 0; r < rounds; r++) {
    for (const which of (r % 2 === 0 ? ["old", "now"] : ["now", "old"]) as Array<"old" | "now">) {
      const f = s[which];
      const t0 = cpuNs();
      for (let i = 0; i < ops; i++) f();
      best[which] = Math.min(best[which], (cpuNs() - t0) / ops);
    }
  }
  console.log(`| ${s.name} | ${best.old.toFixed(0)} | ${best.now.toFixed(0)} |`);
}
console.log(`\nload average at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
