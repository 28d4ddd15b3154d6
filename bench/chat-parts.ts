/**
 * What the parts of the chat hot path cost, one at a time (issue 24): CPU time per operation of each piece a
 * chat request goes through, in this process, each run `--iterations` times after a warm-up; the best of
 * `--repeats` runs is reported (CPU time of this process, so other processes on a shared machine inflate it
 * less than wall time; the best run is the one least disturbed).
 *
 *   node bin/run-ts.mjs bench/chat-parts.ts [--iterations 20000] [--repeats 5]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient, createContextValues, type ConnectRouter } from "@connectrpc/connect";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const iterations = arg("iterations", 20_000);
const repeats = arg("repeats", 5);

/** Best-of-`repeats` CPU µs per call of `fn` (sync or async), `n` calls per run. */
async function cost(fn: () => unknown, n = iterations): Promise<number> {
  for (let i = 0; i < Math.min(n, 2000); i++) await fn();
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) {
      const v = fn();
      if (v instanceof Promise) await v;
    }
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / n);
  }
  return best;
}

const BODY = { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }], stream: false };
const COMPLETION = {
  id: "gen-0f3c2b1e-5d8a-4b7e-9c1d-2e3f4a5b6c7d",
  object: "chat.completion",
  created: 1_700_000_000,
  model: "llama-3.3-70b",
  provider: "groq",
  system_fingerprint: "fp_fake",
  choices: [{ index: 0, message: { role: "assistant", content: "Hello, world!", refusal: null }, logprobs: null, finish_reason: "stop" }],
  usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } },
};

async function main(): Promise<void> {
  const rows: Array<[string, number]> = [];
  const add = (name: string, us: number) => {
    rows.push([name, us]);
    console.error(`${name}: ${us.toFixed(2)} µs`);
  };

  const { ChatRequest } = await import("../src/contract/requests/index.js");
  add("ChatRequest.parse of the body (zod)", await cost(() => ChatRequest.parse(BODY, { brand: "portico" })));

  const { createLogger } = await import("../src/log.js");
  let bytes = 0;
  const sink = new Writable({ write: (c: Buffer, _e, cb) => ((bytes += c.length), cb()) });
  const base = createLogger({ level: "info", destination: sink }).child({ component: "gateway" });
  add("logger: per-request child (as Fastify makes one)", await cost(() => base.child({ reqId: "3b1f5c2e-8a7d-4e6f-9b0c-1d2e3f4a5b6c" })));
  const child = base.child({ reqId: "3b1f5c2e-8a7d-4e6f-9b0c-1d2e3f4a5b6c" });
  add("logger: one `request completed` line (redaction, scrub hook)", await cost(() => child.info({ method: "POST", route: "/api/v1/chat/completions", status: 200, ms: 1.2 }, "request completed")));
  const { pino } = await import("pino");
  const plain = pino({ level: "info" }, sink).child({ component: "gateway" }).child({ reqId: "3b1f5c2e-8a7d-4e6f-9b0c-1d2e3f4a5b6c" });
  add("logger: the same line, plain pino (no redaction, no hook)", await cost(() => plain.info({ method: "POST", route: "/api/v1/chat/completions", status: 200, ms: 1.2 }, "request completed")));

  // The log sink (src/lib/log-sink.ts) in front of a file written synchronously, as stdout to a file or a pipe
  // is: one write per line (before the hotpath session) against the lines of one turn in one write (32 lines a
  // turn, as at c=32).
  const { openSync, writeSync, closeSync } = await import("node:fs");
  const { createLogSink } = await import("../src/lib/log-sink.js");
  const logDir = mkdtempSync(join(tmpdir(), "portico-bench-log-"));
  const fd = openSync(join(logDir, "out.log"), "w");
  const fileStream = () => new Writable({ decodeStrings: false, write: (c: string | Buffer, _e, cb) => (typeof c === "string" ? writeSync(fd, c) : writeSync(fd, c), cb()) });
  const LINE = JSON.stringify({ level: 30, time: Date.now(), pid: 4242, hostname: "bench", component: "gateway", reqId: "3b1f5c2e-8a7d-4e6f-9b0c-1d2e3f4a5b6c", method: "POST", route: "/api/v1/chat/completions", status: 200, ms: 1.2, msg: "request completed" }) + "\n";
  const perLine = fileStream();
  add("log line to a file, one write per line (stream.write)", await cost(() => perLine.write(LINE)));
  const batched = createLogSink(fileStream());
  add("log line to a file through the sink, 32 lines a turn (per line)", (await cost(async () => {
    for (let i = 0; i < 32; i++) batched.write(LINE);
    await new Promise((r) => setImmediate(r));
  }, iterations / 32)) / 32);
  closeSync(fd);
  rmSync(logDir, { recursive: true, force: true });

  // Reading a small upstream body (providers/http.ts `text()`): a Readable's async iterator against listeners.
  const { PassThrough } = await import("node:stream");
  const BODY_TEXT = JSON.stringify(COMPLETION);
  const readable = () => {
    const r = new PassThrough();
    r.end(BODY_TEXT);
    r.setEncoding("utf8");
    return r;
  };
  add("small body read with for await (before)", await cost(async () => {
    let out = "";
    for await (const piece of readable()) out += piece as string;
    return out;
  }, iterations / 4));
  add("small body read with data/end listeners (now)", await cost(() => new Promise<string>((resolve, reject) => {
    const r = readable();
    let out = "";
    r.on("data", (p: string) => (out += p));
    r.once("end", () => resolve(out));
    r.once("error", reject);
  }), iterations / 4));
  const { urlToHttpOptions } = await import("node:url");
  const UPSTREAM = "http://127.0.0.1:43123/v1/chat/completions";
  add("upstream URL: new URL + urlToHttpOptions per request (before)", await cost(() => urlToHttpOptions(new URL(UPSTREAM))));

  const { createMetrics } = await import("../src/lib/metrics.js");
  const metrics = createMetrics();
  add("metrics: the gateway's HTTP histogram observation", await cost(() => metrics.httpDuration.observe({ method: "POST", route: "/api/v1/chat/completions", status: "200" }, 0.0012)));
  add("metrics: the core's RPC timer (start + end)", await cost(() => metrics.rpcDuration.startTimer({ procedure: "portico.chat.v1.ChatService/CreateChatCompletion" })({ code: "ok" })));

  const { hashSecret } = await import("../src/core/identity/keys.js");
  add("sha256 of the API key (auth, every call)", await cost(() => hashSecret("pk-v1-0123456789abcdef0123456789abcdef0123456789abcdef")));

  add("AbortController + listener + abort(reason)", await cost(() => {
    const ac = new AbortController();
    ac.signal.addEventListener("abort", () => undefined, { once: true });
    ac.abort(REASON);
  }));

  // Issue 26: every streamed event's data is scrubbed of the credential (src/core/chat/providers/http.ts).
  const { keyScrubber } = await import("../src/core/chat/providers/http.js");
  const EVENT = JSON.stringify({ id: "chatcmpl-0f3c2b1e", object: "chat.completion.chunk", created: 1_700_000_000, model: "llama-3.3-70b", system_fingerprint: "fp_fake", choices: [{ index: 0, delta: { content: "w42 " }, logprobs: null, finish_reason: null }] });
  const scrub = keyScrubber("gsk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL")!;
  add("key scrub of one streamed event's data (no key in it)", await cost(() => scrub(EVENT)));
  add("JSON.parse of the same event's data (for scale)", await cost(() => JSON.parse(EVENT)));
  const { createKeyGuard } = await import("../src/core/chat/key-guard.js");
  const guard = createKeyGuard("gsk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL")!;
  const piece = (content: string) => ({ id: "c", object: "chat.completion.chunk" as const, created: 0, model: "m", choices: [{ index: 0, delta: { content }, finish_reason: null }] });
  const plainPiece = piece(" w42 and");
  add("key guard of one chunk's text (no `g` in it: one indexOf)", await cost(() => guard.apply(plainPiece)));
  const gPiece = piece(" going g");
  add("key guard of one chunk's text (with `g`: automaton steps)", await cost(() => guard.apply(gPiece)));

  const chat = await import("../src/gen/portico/chat/v1/chat_service_pb.js");
  add("JSON body: JSON.stringify + JSON.parse", await cost(() => JSON.parse(JSON.stringify(BODY))));
  add("Struct body over gRPC: create + toBinary + fromBinary", await cost(() => fromBinary(chat.CreateChatCompletionRequestSchema, toBinary(chat.CreateChatCompletionRequestSchema, create(chat.CreateChatCompletionRequestSchema, { body: BODY })))));
  add("Struct completion over gRPC: create + toBinary + fromBinary", await cost(() => fromBinary(chat.CreateChatCompletionResponseSchema, toBinary(chat.CreateChatCompletionResponseSchema, create(chat.CreateChatCompletionResponseSchema, { completion: COMPLETION })))));
  add("JSON completion: JSON.stringify + JSON.parse", await cost(() => JSON.parse(JSON.stringify(COMPLETION))));

  // The in-memory transport with the core's three interceptors and a handler that answers at once.
  const { createDirectTransport } = await import("../src/core/direct-transport.js");
  const { createMetricsInterceptor } = await import("../src/core/metrics-interceptor.js");
  const { createAuthInterceptor, createErrorBoundaryInterceptor } = await import("../src/core/auth.js");
  const key = "pk-v1-0123456789abcdef0123456789abcdef0123456789abcdef";
  const record = { keyId: "k", keyHash: hashSecret(key), keyLabel: "l", organizationId: "o", workspaceId: "w", userId: "u", isManagement: false, internsProgramme: false, disabled: false, revoked: false, creatorIsMember: true, workspaceDeleted: false };
  const routes = (router: ConnectRouter) =>
    router.service(chat.ChatService, {
      createChatCompletion: () => ({ completion: COMPLETION }),
      async *streamChatCompletion() {
        yield { chunk: COMPLETION };
      },
      listModels: () => ({ models: [] }),
    });
  const transport = createDirectTransport(routes, [
    createMetricsInterceptor(metrics),
    createErrorBoundaryInterceptor(() => undefined),
    createAuthInterceptor({ lookup: async () => record, publicServices: new Set() }),
  ]);
  const client = createClient(chat.ChatService, transport);
  const headers = { authorization: `Bearer ${key}`, "x-request-id": "3b1f5c2e-8a7d-4e6f-9b0c-1d2e3f4a5b6c" };
  add("in-process unary RPC, core interceptors, handler answers at once", await cost(() => client.createChatCompletion({ body: BODY }, { headers, signal: new AbortController().signal }), iterations / 4));
  const bare = createDirectTransport(routes, []);
  const bareClient = createClient(chat.ChatService, bare);
  add("  the same without interceptors", await cost(() => bareClient.createChatCompletion({ body: BODY }, { headers, signal: new AbortController().signal }), iterations / 4));
  void createContextValues;

  // Generation records: queued per request, written in multi-row INSERTs through Prisma.
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-parts-"));
  try {
    const { openDatabase } = await import("../src/db/client.js");
    const { bootstrap } = await import("../src/core/identity/bootstrap.js");
    const { createGenerationStore } = await import("../src/core/chat/generations.js");
    const database = await openDatabase({ dataDir: dir });
    const boot = await bootstrap(database.db, []);
    const store = createGenerationStore({ db: database.db, provider: database.provider, logger: createLogger({ level: "error" }), flushMs: 1e9, batch: 1e9 });
    let n = 0;
    const row = () => ({
      id: `gen-${n++}`, organizationId: boot.organization_id, workspaceId: boot.workspace_id, keyHash: record.keyHash, requestedModel: "groq/llama-3.3-70b", model: "llama-3.3-70b",
      provider: "groq", credentialId: "c", credentialSource: "byok" as const, presetSlug: null, presetVersion: null, streamed: false, promptTokens: 12, completionTokens: 4,
      totalTokens: 16, latencyMs: 1.2, timeToFirstTokenMs: null, status: "success" as const, finishReason: "stop", errorCode: null, attempts: 1, createdAt: new Date(),
      cachedTokens: 0, cacheWriteTokens: null, reasoningTokens: null, costFemtoUsd: 0n, upstreamCostFemtoUsd: 7_080_000_000_000n,
    });
    const direct = createGenerationStore({ db: database.db, provider: database.provider, logger: createLogger({ level: "error" }), flushMs: 1e9, batch: 1e9, execute: database.executeRaw, writeSqlite: database.writeSqlite });
    for (const [name, s] of [["through the Prisma client", store], ["on the driver adapter (as the core does)", direct]] as const) {
      for (const perFlush of [10, 50, 150]) {
        const us = await cost(async () => {
          for (let i = 0; i < perFlush; i++) s.record(row());
          await s.flush();
        }, 40);
        add(`generation rows ${name}, ${perFlush} per flush (SQLite), per row`, us / perFlush);
      }
    }
    await database.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  console.log(`\nNode ${process.version}; best of ${repeats} runs; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}.\n`);
  console.log("| part | CPU µs per operation |\n|---|---:|");
  for (const [name, us] of rows) console.log(`| ${name} | ${us.toFixed(2)} |`);
}

const REASON = new Error("ended");
await main();
