/**
 * What starting a stream costs beside a whole non-streamed request (issue 24's first-chunk goal), with the targets
 * interleaved request by request, so that the shared machine's load falls on every target alike (chat-hot-path.ts
 * takes turns per round of seconds, too coarse when the load swings under it).
 *
 *   npm run -s build && node bin/run-ts.mjs bench/stream-first-chunk.ts [--base <checkout>] [--requests 3000]
 *
 * The fake provider (chat-hot-path.ts's, a process of its own) answers "Hello, world!" whole or as a stream of a
 * few events in one write. Targets: the fake directly, `portico serve` (1 worker) of this checkout, and with `--base`
 * the same of another checkout (its own dist/ built), each on a fresh data folder. One client (this process, one
 * keep-alive connection per target) at concurrency 1 runs `--requests` rounds; each round visits every target, in
 * an order that rotates, with a non-streamed request then a streamed one. Figures per target: p50 of the
 * non-streamed request's whole time, p50 of the streamed one's time to its first `data:` bytes, and the median
 * over rounds of the difference (the stream's start minus the whole request, in the same round).
 */
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createByok, spawnUntil, startServe, stop } from "./lib/processes.js";
import type { ChildProcess } from "node:child_process";
import { flag, num } from "./lib/args.js";

const requests = num("requests", 3000);
const base = flag("base");
const WARMUP = Math.min(500, Math.floor(requests / 5));

interface Target {
  name: string;
  url: URL;
  key: string;
  model: string;
  agent: http.Agent;
  whole: number[];
  first: number[];
  diff: number[];
}

function once(t: Target, stream: boolean): Promise<number> {
  const body = JSON.stringify({ model: t.model, messages: [{ role: "user", content: "Say hello." }], stream });
  return new Promise((done, fail) => {
    const start = performance.now();
    let at = 0;
    const req = http.request(t.url, { method: "POST", agent: t.agent, headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      res.on("data", (b: Buffer) => {
        if (at === 0 && stream && b.includes("data:")) at = performance.now();
      });
      res.on("end", () => (res.statusCode === 200 ? done((stream ? at : performance.now()) - start) : fail(new Error(`${t.name}: HTTP ${res.statusCode}`))));
    });
    req.on("error", fail);
    req.end(body);
  });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const dir = mkdtempSync(join(tmpdir(), "portico-bench-first-chunk-"));
const children: ChildProcess[] = [];
const loadStart = loadavg().map((l) => l.toFixed(2)).join(" ");
try {
  const fakes = await spawnUntil(["bin/run-ts.mjs", resolve(import.meta.dirname, "chat-hot-path.ts"), "--role", "fakes"], {}, join(dir, "fakes.log"), (out) => /FAKES (\S+) (\S+)/.exec(out)?.[1]);
  children.push(fakes.child);
  const target = (name: string, url: string, key: string, model: string): Target => ({ name, url: new URL(url), key, model, agent: new http.Agent({ keepAlive: true, maxSockets: 1 }), whole: [], first: [], diff: [] });
  const targets = [target("direct to the fake provider", `${fakes.value}/v1/chat/completions`, "k", "llama-3.3-70b")];
  const checkouts: Array<[string, string | undefined]> = [["serve, 1 worker", undefined], ...(base ? [["serve, 1 worker (base)", resolve(base)] as [string, string]] : [])];
  for (const [i, [name, checkout]] of checkouts.entries()) {
    const s = await startServe({ dataDir: join(dir, `data-${i}`), logFile: join(dir, `serve-${i}.log`), env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${fakes.value}/v1` }, ...(checkout ? { checkout } : {}) });
    children.push(s.child);
    await createByok(s.api, s.management, { provider: "groq", key: "gsk-bench" });
    targets.push(target(name, `${s.api}/chat/completions`, s.apiKey, "groq/llama-3.3-70b"));
  }
  for (let round = 0; round < requests + WARMUP; round++) {
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(round + k) % targets.length]!;
      const whole = await once(t, false);
      const first = await once(t, true);
      if (round < WARMUP) continue;
      t.whole.push(whole);
      t.first.push(first);
      t.diff.push(first - whole);
    }
  }
  const direct = targets[0]!;
  console.log(`Node ${process.version}; ${requests} rounds (after ${WARMUP}), c=1; load average at start ${loadStart}, at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}\n`);
  console.log("| target | non-streamed p50 ms (added) | first chunk p50 ms (added) | first chunk − non-streamed, median of rounds, ms |");
  console.log("|---|---:|---:|---:|");
  for (const t of targets) {
    const added = (v: number, d: number) => (t === direct ? v.toFixed(3) : `${v.toFixed(3)} (+${(v - d).toFixed(3)})`);
    console.log(`| ${t.name} | ${added(median(t.whole), median(direct.whole))} | ${added(median(t.first), median(direct.first))} | ${median(t.diff).toFixed(3)} |`);
  }
} finally {
  for (const c of children.reverse()) await stop(c);
  rmSync(dir, { recursive: true, force: true });
}
