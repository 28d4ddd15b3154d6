/**
 * CPU per upstream call of the provider HTTP client, against alternatives: one POST with a JSON body to a local
 * fake provider (a child process, so only the client's CPU is counted), the answer read as JSON or as an SSE
 * stream. Clients, taking turns in each round:
 *
 * - `portico`: this tree's `postJson` + `readJson` / `sseEvents` (providers/http.ts), called as the OpenAI-compatible
 *   adapter calls them (first-byte limit, key scrub, `[DONE]` marker, linked controller for streams);
 * - `node:http`: a bare `http.request` on a keep-alive agent, the body read with listeners;
 * - `undici request`: `Pool.request` (the promise API), the body read with `.text()` / its async iterator;
 * - `undici dispatch`: `Pool.dispatch` with a hand-written handler (the lowest level undici offers).
 *
 * The three bare clients do the same non-transport work as `portico` (JSON.stringify of the body, JSON.parse of
 * the answer, a TextDecoder and an eventsource-parser per stream), none of its checks or timers. CPU of this
 * process per call (µs) or per streamed event, `--concurrency` calls in flight; several rounds, best and median.
 *
 *   node bin/run-ts.mjs bench/upstream-client.ts [--calls 4000] [--streams 200] [--events 100] [--concurrency 8]
 *     [--rounds 5] [--only portico,node:http,undici request,undici dispatch] [--spread] [--base DIR]
 *
 * `--spread` writes one event per turn of the fake's loop (each its own socket read) instead of one burst;
 * `--base DIR` adds another checkout's providers/http.ts as `portico (base)`.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import http from "node:http";
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { createParser } from "eventsource-parser";
import { Pool, type Dispatcher } from "undici";
import { flag, num } from "./lib/args.js";

const calls = num("calls", 4000);
const streams = num("streams", 200);
const events = num("events", 100);
const concurrency = num("concurrency", 8);
const rounds = num("rounds", 5);
const spread = process.argv.includes("--spread");
const only = flag("only")?.split(",");
const base = flag("base");

const PROVIDER = `
const http = require("node:http");
const n = ${events};
const spread = ${spread};
const completion = JSON.stringify({ id: "chatcmpl-1", object: "chat.completion", created: 1, model: "llama-3.3-70b", choices: [{ index: 0, message: { role: "assistant", content: "Hello, world!" }, finish_reason: "stop" }], usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 } });
const line = (i) => "data: " + JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "llama-3.3-70b", choices: [{ index: 0, delta: { content: "w" + i + " " }, finish_reason: null }] }) + "\\n\\n";
const server = http.createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    if (!JSON.parse(body).stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(completion);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.flushHeaders();
    let i = 0;
    const step = () => {
      while (i < n) {
        res.write(line(i++));
        if (spread) return setImmediate(step);
      }
      res.end("data: [DONE]\\n\\n");
    };
    step();
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, "127.0.0.1", function () { process.stdout.write(String(this.address().port) + "\\n"); });
`;

interface Client {
  name: string;
  json(): Promise<unknown>;
  stream(): Promise<number>;
  close?(): Promise<void>;
}

const KEY = "sk-bench-key-0123456789";
const REQUEST = { model: "llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }] };

async function porticoClient(name: string, root: string, url: string): Promise<Client> {
  const h = await import(pathToFileURL(resolve(root, "src/core/chat/providers/http.ts")).href);
  const post = (stream: boolean, signal: AbortSignal) =>
    h.postJson({
      url,
      headers: stream ? { authorization: `Bearer ${KEY}`, accept: "text/event-stream" } : { authorization: `Bearer ${KEY}` },
      body: { ...REQUEST, stream },
      signal,
      apiKey: KEY,
      errorMessage: () => undefined,
      firstByteTimeoutMs: 30_000,
    });
  return {
    name,
    async json() {
      const caller = new AbortController();
      return h.readJson(await post(false, caller.signal));
    },
    async stream() {
      const caller = new AbortController();
      const controller = h.linkedController(caller.signal);
      const response = await post(true, controller.signal);
      let n = 0;
      for await (const e of h.sseEvents(response, controller, (ev: { data: string }) => ev.data.trim() === "[DONE]", KEY)) {
        const data = e.data.trim();
        if (data === "[DONE]") break;
        h.parseEventData(data);
        n++;
      }
      return n;
    },
  };
}

function nodeHttpClient(url: string): Client {
  const target = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 256, scheduling: "lifo" });
  const post = (stream: boolean, onResponse: (res: http.IncomingMessage) => void, onError: (err: Error) => void) => {
    const payload = JSON.stringify({ ...REQUEST, stream });
    const req = http.request({
      agent,
      host: target.hostname,
      port: target.port,
      path: target.pathname,
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}`, "content-length": String(Buffer.byteLength(payload)) },
    });
    req.once("response", onResponse);
    req.on("error", onError);
    req.end(payload);
  };
  return {
    name: "node:http",
    json: () =>
      new Promise((resolve, reject) =>
        post(
          false,
          (res) => {
            res.setEncoding("utf8");
            let text = "";
            res.on("data", (d: string) => (text += d));
            res.once("end", () => resolve(JSON.parse(text)));
            res.once("error", reject);
          },
          reject,
        ),
      ),
    stream: () =>
      new Promise((resolve, reject) =>
        post(
          true,
          (res) => {
            const events = eventCounter();
            res.on("data", events.feed);
            res.once("end", () => resolve(events.count()));
            res.once("error", reject);
          },
          reject,
        ),
      ),
  };
}

/** Feeds a response's SSE bytes to eventsource-parser, parsing each event's JSON (as a client does) and counting the events before `[DONE]`. */
function eventCounter(): { feed: (chunk: Buffer) => void; count: () => number } {
  let n = 0;
  const decoder = new TextDecoder();
  const parser = createParser({
    onEvent: (e) => {
      if (e.data.trim() !== "[DONE]") {
        JSON.parse(e.data);
        n++;
      }
    },
  });
  return { feed: (chunk) => parser.feed(decoder.decode(chunk, { stream: true })), count: () => n };
}

function undiciRequestClient(url: string): Client {
  const target = new URL(url);
  const pool = new Pool(target.origin, { keepAliveTimeout: 4_000 });
  const post = (stream: boolean) =>
    pool.request({
      path: target.pathname,
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ ...REQUEST, stream }),
    });
  return {
    name: "undici request",
    async json() {
      const res = await post(false);
      return JSON.parse(await res.body.text());
    },
    async stream() {
      const res = await post(true);
      const events = eventCounter();
      for await (const d of res.body as AsyncIterable<Buffer>) events.feed(d);
      return events.count();
    },
    close: () => pool.close(),
  };
}

function undiciDispatchClient(url: string): Client {
  const target = new URL(url);
  const pool = new Pool(target.origin, { keepAliveTimeout: 4_000 });
  const dispatch = (stream: boolean, onData: (chunk: Buffer) => void, onEnd: () => void, onError: (err: Error) => void) => {
    const handler: Dispatcher.DispatchHandler = {
      onConnect() {},
      onHeaders(status: number) {
        if (status !== 200) onError(new Error(`status ${status}`));
        return true;
      },
      onData(chunk: Buffer) {
        onData(chunk);
        return true;
      },
      onComplete() {
        onEnd();
      },
      onError,
    } as never;
    pool.dispatch(
      {
        path: target.pathname,
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ ...REQUEST, stream }),
      },
      handler,
    );
  };
  return {
    name: "undici dispatch",
    json: () =>
      new Promise((resolve, reject) => {
        const parts: Buffer[] = [];
        dispatch(
          false,
          (c) => parts.push(c),
          () => resolve(JSON.parse(parts.length === 1 ? parts[0]!.toString("utf8") : Buffer.concat(parts).toString("utf8"))),
          reject,
        );
      }),
    stream: () =>
      new Promise((resolve, reject) => {
        const events = eventCounter();
        dispatch(true, events.feed, () => resolve(events.count()), reject);
      }),
    close: () => pool.close(),
  };
}

/** `total` calls of `fn`, `concurrency` at a time; CPU µs of this process per unit (a call, or an event). */
async function measure(total: number, fn: () => Promise<number>): Promise<number> {
  let left = total;
  let units = 0;
  const c0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, total) }, async () => {
      while (left > 0) {
        left--;
        units += await fn();
      }
    }),
  );
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / units;
}

async function main(): Promise<void> {
  const child = spawn(process.execPath, ["-e", PROVIDER], { stdio: ["ignore", "pipe", "inherit"] });
  const [first] = (await once(child.stdout!, "data")) as [Buffer];
  const url = `http://127.0.0.1:${first.toString().trim()}/v1/chat/completions`;
  const clients: Client[] = [
    ...(base ? [await porticoClient("portico (base)", base, url)] : []),
    await porticoClient("portico", process.cwd(), url),
    nodeHttpClient(url),
    undiciRequestClient(url),
    undiciDispatchClient(url),
  ].filter((c) => !only || only.includes(c.name));
  const jsonCall = (c: Client) => async () => {
    const v = (await c.json()) as { choices?: unknown[] };
    if (!Array.isArray(v.choices)) throw new Error(`${c.name}: not a completion`);
    return 1;
  };
  const streamCall = (c: Client) => async () => {
    const n = await c.stream();
    if (n !== events) throw new Error(`${c.name}: ${n} events of ${events}`);
    return n;
  };
  console.log(
    `Node ${process.version}; load average at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}; concurrency ${concurrency}; ` +
      `${calls} JSON calls and ${streams} streams of ${events} events${spread ? " (one write per event)" : " (one burst)"} per client per round, ${rounds} rounds`,
  );
  for (const c of clients) {
    await measure(Math.max(200, calls / 10), jsonCall(c));
    await measure(Math.max(20, streams / 10), streamCall(c));
  }
  const json = new Map<string, number[]>(clients.map((c) => [c.name, []]));
  const sse = new Map<string, number[]>(clients.map((c) => [c.name, []]));
  for (let r = 0; r < rounds; r++) {
    // Rotate the order each round, so no client always runs first after a pause.
    const order = clients.map((_, i) => clients[(i + r) % clients.length]!);
    for (const c of order) json.get(c.name)!.push(await measure(calls, jsonCall(c)));
    for (const c of order) sse.get(c.name)!.push(await measure(streams, streamCall(c)));
    console.log(`round ${r + 1} done, load ${loadavg()[0]!.toFixed(2)}`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const ref = clients.find((c) => c.name === "node:http")?.name ?? clients[0]!.name;
  console.log(`\n| client | JSON call: best µs | median µs | vs ${ref} (median) | stream: best µs/event | median µs/event | vs ${ref} (median) |`);
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const c of clients) {
    const j = json.get(c.name)!;
    const s = sse.get(c.name)!;
    const pct = (m: number, r: number) => `${m >= r ? "+" : ""}${(((m - r) / r) * 100).toFixed(1)} %`;
    console.log(
      `| ${c.name} | ${Math.min(...j).toFixed(1)} | ${median(j).toFixed(1)} | ${pct(median(j), median(json.get(ref)!))} | ${Math.min(...s).toFixed(2)} | ${median(s).toFixed(2)} | ${pct(median(s), median(sse.get(ref)!))} |`,
    );
  }
  console.log(`load average at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  for (const c of clients) await c.close?.();
  child.kill();
}

await main();
