/**
 * CPU per upstream SSE event read by `sseEvents` (providers/http.ts) over a real keep-alive HTTP response:
 * a provider in a child process writes `--events` events, one write per event (each its own socket read
 * here; with `--burst`, all of them in one loop turn, as the hot-path bench's fake provider does, so that one
 * socket read here brings many); this process posts with `postJson` and reads the events. CPU µs of this process (the reader) per
 * event, best of `--repeats` runs; `--base DIR` runs another checkout's http.ts taking turns with this tree.
 *
 *   node bin/run-ts.mjs bench/upstream-sse.ts [--base /work/main] [--events 200] [--streams 100] [--pairs 3] [--repeats 3] [--burst]
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { flag, num } from "./lib/args.js";

const events = num("events", 200);
const streams = num("streams", 100);
const pairs = num("pairs", 3);
const repeats = num("repeats", 3);
const base = flag("base");
const burst = process.argv.includes("--burst");

const PROVIDER = `
const http = require("node:http");
const n = ${events};
const line = (i) => "data: " + JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "word " + i }, finish_reason: null }] }) + "\\n\\n";
http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    let i = 0;
    const step = () => {
      if (i < n && ${burst}) { while (i < n) res.write(line(i++)); step(); }
      else if (i < n) { res.write(line(i++)); setImmediate(step); }
      else { res.end("data: [DONE]\\n\\n"); }
    };
    step();
  });
}).listen(0, "127.0.0.1", function () { process.stdout.write(String(this.address().port) + "\\n"); });
`;

async function main(): Promise<void> {
  const child = spawn(process.execPath, ["-e", PROVIDER], { stdio: ["ignore", "pipe", "inherit"] });
  const [first] = (await once(child.stdout!, "data")) as [Buffer];
  const url = `http://127.0.0.1:${first.toString().trim()}/v1/chat/completions`;
  const trees: Array<{ name: string; run: () => Promise<number> }> = [];
  for (const [name, root] of [...(base ? [[`base (${base})`, base]] : []), ["this tree", process.cwd()]] as Array<[string, string]>) {
    const http = await import(pathToFileURL(resolve(root, "src/core/chat/providers/http.ts")).href);
    trees.push({
      name,
      async run() {
        const controller = new AbortController();
        const response = await http.postJson({ url, headers: {}, body: { stream: true }, signal: controller.signal, apiKey: "sk-bench-key-0123456789", errorMessage: () => undefined });
        let n = 0;
        for await (const e of http.sseEvents(response, controller, (ev: { data: string }) => ev.data === "[DONE]", "sk-bench-key-0123456789")) {
          if (e.data === "[DONE]") break;
          n++;
        }
        return n;
      },
    });
  }
  const perEvent = async (t: (typeof trees)[number]) => {
    for (let i = 0; i < 10; i++) await t.run();
    let best = Infinity;
    for (let r = 0; r < repeats; r++) {
      const c0 = process.cpuUsage();
      let n = 0;
      for (let i = 0; i < streams; i++) n += await t.run();
      const c = process.cpuUsage(c0);
      if (n !== streams * events) throw new Error(`${t.name}: ${n} events of ${streams * events}`);
      best = Math.min(best, (c.user + c.system) / n);
    }
    return best;
  };
  console.log(`load average at start ${loadavg()[0]!.toFixed(2)}; ${streams} streams of ${events} events${burst ? " written in one burst" : ""}, best of ${repeats}`);
  for (let p = 0; p < pairs; p++) {
    const row = [];
    for (const t of trees) row.push(`${t.name} ${(await perEvent(t)).toFixed(2)} µs/event`);
    console.log(`pair ${p + 1}: ${row.join(" | ")}`);
  }
  console.log(`load average at end ${loadavg()[0]!.toFixed(2)}`);
  child.kill();
}

await main();
