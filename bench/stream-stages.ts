/**
 * CPU per streamed chunk through the stages around `execute` (limits, cost, record), composed as chat-handler.ts
 * composes them, over a source that yields chunks at once (an async generator, as the execute stage's relay),
 * read with `for await` as the chat handler reads it. `--base DIR` runs the same against another checkout's
 * `src/` (e.g. /work/main) taking turns with this tree, `--pairs` times; CPU µs of this process per chunk,
 * best of `--repeats` runs each turn.
 *
 *   node bin/run-ts.mjs bench/stream-stages.ts [--base /work/main] [--chunks 200] [--streams 500] [--pairs 3] [--repeats 3]
 */
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { flag, num } from "./lib/args.js";

const chunks = num("chunks", 200);
const streams = num("streams", 500);
const pairs = num("pairs", 3);
const repeats = num("repeats", 3);
const base = flag("base");

interface Tree {
  name: string;
  runStream: () => Promise<number>;
}

async function treeAt(name: string, root: string): Promise<Tree> {
  const m = (p: string) => import(pathToFileURL(resolve(root, "src", p)).href);
  const [{ compose, newCall }, { createRecordStage }, { createCostStage }, { createLimitsStage }, { createMemoryConcurrencyLimiter }] = await Promise.all([
    m("core/chat/pipeline/stage.ts"),
    m("core/chat/pipeline/record.ts"),
    m("core/chat/pipeline/cost.ts"),
    m("core/chat/pipeline/limits.ts"),
    m("lib/concurrency-limiter.ts"),
  ]);
  let recorded = 0;
  const usage = { prompt_tokens: 12, completion_tokens: chunks, total_tokens: 12 + chunks };
  async function* relay() {
    for (let i = 0; i < chunks; i++) {
      yield {
        id: "gen-1",
        object: "chat.completion.chunk",
        created: 1_700_000_000,
        model: "m",
        provider: "p",
        choices: [{ index: 0, delta: { content: "word " }, finish_reason: i === chunks - 1 ? "stop" : null }],
        ...(i === chunks - 1 ? { usage } : {}),
      };
    }
  }
  const execute = { name: "execute", run: async () => ({ kind: "stream", events: relay() }) };
  const pipeline = compose([
    createRecordStage({ generations: { record: () => void recorded++ } }),
    createCostStage({ catalog: { resolve: () => undefined } as never }),
    createLimitsStage({ limiter: createMemoryConcurrencyLimiter(), maxConcurrentPerKey: 8 }),
    execute,
  ]);
  const caller = { organizationId: "o", workspaceId: "w", keyHash: "k" };
  const signal = new AbortController().signal;
  return {
    name,
    async runStream() {
      const outcome = await pipeline(newCall(caller as never, signal, true, { model: "m", messages: [] } as never));
      let n = 0;
      for await (const e of outcome.events) n += e.choices.length;
      if (n !== chunks) throw new Error(`${name}: ${n} chunks of ${chunks}`);
      return recorded;
    },
  };
}

async function perChunk(t: Tree): Promise<number> {
  for (let i = 0; i < 50; i++) await t.runStream();
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < streams; i++) await t.runStream();
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / (streams * chunks));
  }
  return best;
}

async function main(): Promise<void> {
  const trees = [await treeAt("this tree", process.cwd())];
  if (base) trees.unshift(await treeAt(`base (${base})`, base));
  console.log(`load average at start ${loadavg()[0]!.toFixed(2)}; ${streams} streams of ${chunks} chunks, best of ${repeats}`);
  for (let p = 0; p < pairs; p++) {
    const row = [];
    for (const t of trees) row.push(`${t.name} ${(await perChunk(t)).toFixed(3)} µs/chunk`);
    console.log(`pair ${p + 1}: ${row.join(" | ")}`);
  }
  console.log(`load average at end ${loadavg()[0]!.toFixed(2)}`);
}

await main();
