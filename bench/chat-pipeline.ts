/**
 * CPU of the core's chat pipeline alone, per request and per streamed chunk: `createChatHandler` built as
 * src/core/core.ts builds it (every stage in its chain: record, limits, rate, cost, validate, content, preset,
 * route, server tools, cache, plan, plugins, spend, execute; sticky sessions, account routing settings, the
 * health memory), with in-memory stores and a provider adapter that answers at once (no HTTP, no sockets; a stream's
 * events are read from their upstream data text as the OpenAI-compatible adapter reads them), called
 * the way the in-process transport calls it (`createChatCompletion` / `streamChatCompletion` with a handler
 * context). The request is the hot-path bench's: no plugin, cache, tool, preset or tracing; one BYOK credential.
 *
 * What it shows is Portico's own per-request work in the core, without the HTTP server and client whose cost the
 * bare relay pays too; it is steadier than the end-to-end bench on a loaded machine (one process, CPU of this
 * process only, best of `--repeats`). `--base <checkout>[,<checkout>…]` runs the same against other checkouts' `src/`
 * (no build needed), taking turns with this tree `--pairs` times.
 *
 *   node bin/run-ts.mjs bench/chat-pipeline.ts [--base /work/base-hot] [--requests 20000] [--streams 400]
 *       [--chunks 100] [--pairs 3] [--repeats 3]
 */
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { flag, num } from "./lib/args.js";

const requests = num("requests", 20_000);
const streams = num("streams", 400);
const chunks = num("chunks", 100);
const pairs = num("pairs", 3);
const repeats = num("repeats", 3);
const base = flag("base");

interface Tree {
  name: string;
  /** CPU µs per non-streamed request, over `n` requests (c=1, one after the other). */
  unary(n: number): Promise<number>;
  /** CPU µs per streamed chunk, over `n` streams of `chunks` chunks. */
  stream(n: number): Promise<number>;
}

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

async function treeAt(name: string, root: string): Promise<Tree> {
  const m = (p: string) => import(pathToFileURL(resolve(root, "src", p)).href);
  // Older trees (e.g. bcea282, before the health memory and sticky sessions) lack some modules: what they lack is left out.
  const optional = (p: string) => m(p).catch(() => ({}));
  const [{ createChatHandler }, { kCaller }, { createCatalog }, { BUILTIN_CATALOG }, { ProviderRegistry }, { createMemoryConcurrencyLimiter }, { createMemoryHealthMemory }, { createMemorySessionAffinity }, { createMemoryCooldowns }, { createContextValues }, pino, { parseEventData }, { createEventReader }] =
    await Promise.all([
      m("core/chat/chat-handler.ts"),
      m("core/auth.ts"),
      m("core/catalog/catalog.ts"),
      m("core/catalog/builtin-catalog.ts"),
      m("core/chat/providers/index.ts"),
      m("lib/concurrency-limiter.ts"),
      optional("lib/health-memory.ts"),
      optional("lib/session-affinity.ts"),
      optional("core/chat/cooldowns.ts"),
      import("@connectrpc/connect"),
      import("pino"),
      m("core/chat/providers/http.ts"),
      optional("core/chat/raw-events.ts"),
    ]);
  // The upstream's events as the hot-path bench's fake provider writes them (test/helpers/fake-upstreams/openai.ts):
  // a role chunk, content chunks, a finishing chunk and the usage chunk, `chunks + 1` events in all.
  const head = { id: "chatcmpl-fake1", object: "chat.completion.chunk", created: 1_700_000_000, model: "llama-3.3-70b", system_fingerprint: "fp_fake" };
  const line = (delta: unknown, finish: string | null = null) => JSON.stringify({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: null });
  const lines = [
    line({ role: "assistant", content: "", refusal: null }),
    ...Array.from({ length: chunks - 2 }, (_, i) => line({ content: `w${i} ` })),
    line({}, "stop"),
    JSON.stringify({ ...head, choices: [], usage: { prompt_tokens: 12, completion_tokens: chunks, total_tokens: 12 + chunks } }),
  ];
  // The fake adapter: answers at once; a stream's events are read from their data text as the tree's OpenAI-compatible
  // adapter reads them (its event reader where it has one, else `parseEventData`; the same checks per event).
  const adapter = {
    async complete() {
      return {
        id: "chatcmpl-1",
        object: "chat.completion",
        created: 1_700_000_000,
        model: "llama-3.3-70b",
        choices: [{ index: 0, message: { role: "assistant", content: "Hello, world!" }, finish_reason: "stop", native_finish_reason: "stop" }],
        usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 },
      };
    },
    async *stream(call: { rawEvents?: unknown }) {
      const read: (data: string) => Record<string, unknown> = call.rawEvents && createEventReader ? createEventReader(parseEventData, call.rawEvents) : parseEventData;
      for (const data of lines) {
        const value = read(data) as { error?: unknown; choices?: Array<{ finish_reason?: unknown; native_finish_reason?: unknown }> };
        if (value.error !== undefined && !Array.isArray(value.choices)) throw new Error("upstream error");
        if (Array.isArray(value.choices)) {
          for (const choice of value.choices) {
            if (choice.finish_reason && choice.native_finish_reason === undefined) choice.native_finish_reason = choice.finish_reason;
          }
        }
        yield value;
      }
    },
    upstreamBody: () => ({}),
  };
  const providers = new ProviderRegistry();
  const groq = providers.get("groq");
  (groq as { adapter: unknown }).adapter = adapter;
  const credential = {
    id: "cred-1",
    provider: "groq",
    disabled: false,
    allowedModels: null,
    allowedApiKeyHashes: null,
    allowedUserIds: null,
    isRequired: false,
    isFallback: false,
    isByokOnly: false,
    sortOrder: 0,
    createdAt: new Date(0),
    apiKey: "gsk-bench-key-0123456789",
  };
  const logger = pino.default({ level: "silent" });
  let recorded = 0;
  const handler = createChatHandler({
    presets: {} as never,
    generations: { record: () => void recorded++ },
    credentials: { forProvider: async (_ws: string, p: string) => (p === "groq" ? [credential] : []), listAll: async () => [credential] },
    providers,
    catalog: createCatalog(BUILTIN_CATALOG),
    brand: "portico",
    limits: { maxAttempts: 3, maxConcurrentPerKey: 64, spendReservationTtlMs: 60_000 } as never,
    slots: createMemoryConcurrencyLimiter(),
    spend: {} as never,
    rates: { admit: async () => ({ ok: true }), addTokens: async () => undefined, close: async () => undefined },
    logger,
    timeouts: { firstByteMs: 60_000, answerMs: 300_000, budgetMs: 600_000, retries: 0, retryBaseMs: 250, retryMaxMs: 4000, streamFloorBytesPerSecond: 0, streamProbeMs: 2000 },
    ...(createMemoryHealthMemory ? { health: createMemoryHealthMemory() } : { cooldowns: createMemoryCooldowns() }),
    keepaliveMs: 15_000,
    accountRouting: async () => [],
    credentialOrder: "balanced",
    ...(createMemorySessionAffinity ? { affinity: createMemorySessionAffinity({ ttlMs: 3_600_000, maxEntries: 10_000 }) } : {}),
    responseCache: undefined,
    contentLog: undefined,
  });
  const caller = {
    keyId: "key-1",
    keyHash: "hash-1",
    keyLabel: "bench",
    organizationId: "org-1",
    workspaceId: "ws-1",
    userId: "user-1",
    isManagement: false,
    internsProgramme: false,
    responseCacheTtlSeconds: null,
    contentLogRetentionDays: null,
  };
  const ctx = () => {
    const values = createContextValues();
    values.set(kCaller, caller);
    const ac = new AbortController();
    return { signal: ac.signal, requestHeader: new Headers({ "x-request-id": "r" }), responseHeader: new Headers(), responseTrailer: new Headers(), values, timeoutMs: () => undefined };
  };
  // A fresh body per request, as the gateway's JSON parser makes one.
  const body = (stream: boolean) => JSON.parse(JSON.stringify({ model: stream ? "groq/llama-3.3-70b" : "groq/llama-3.3-70b", messages: [{ role: "user", content: stream ? "Count." : "Say hello." }], stream }));
  const one = async () => {
    const res = await handler.createChatCompletion({ body: body(false), jsonText: true }, ctx());
    if (!res.completionJson) throw new Error("no completion");
  };
  const oneStream = async () => {
    let n = 0;
    for await (const msg of handler.streamChatCompletion({ body: body(true), jsonText: true }, ctx())) if (msg.chunkJson) n++;
    if (n !== chunks + 1) throw new Error(`stream of ${n} chunks`);
    return n;
  };
  return {
    name,
    async unary(n) {
      const t0 = cpuUs();
      for (let i = 0; i < n; i++) await one();
      return (cpuUs() - t0) / n;
    },
    async stream(n) {
      let total = 0;
      const t0 = cpuUs();
      for (let i = 0; i < n; i++) total += await oneStream();
      return (cpuUs() - t0) / total;
    },
  };
}

const trees = [await treeAt("this tree", resolve(import.meta.dirname, ".."))];
for (const b of base ? base.split(",") : []) trees.push(await treeAt(`base (${b})`, resolve(b)));
// Warm-up: every path JIT-compiled before the first measured run.
for (const t of trees) {
  await t.unary(Math.min(2000, requests));
  await t.stream(Math.min(40, streams));
}
console.log(`Node ${process.version}; ${requests} requests, ${streams} streams of ${chunks} chunks per run; best of ${repeats} runs, ${pairs} pair(s); load average at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}\n`);
console.log("| pair | tree | CPU µs per request | CPU µs per chunk |");
console.log("|---|---|---:|---:|");
for (let p = 1; p <= pairs; p++) {
  for (const t of trees) {
    let unary = Infinity;
    let stream = Infinity;
    for (let r = 0; r < repeats; r++) {
      unary = Math.min(unary, await t.unary(requests));
      stream = Math.min(stream, await t.stream(streams));
    }
    console.log(`| ${p} | ${t.name} | ${unary.toFixed(2)} | ${stream.toFixed(3)} |`);
  }
}
console.log(`\nload average at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
