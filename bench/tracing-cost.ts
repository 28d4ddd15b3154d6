/**
 * CPU that tracing adds to one non-streaming chat request, in process (issue 29: ≤ 10 % with every request
 * sampled). Steadier than `bench/chat-resilience.ts --only tracing` on a loaded machine: both modes run in one
 * process, taking turns every `--requests` requests, so the load moves them alike.
 *
 *   node bin/run-ts.mjs bench/tracing-cost.ts [--base <checkout>[,<checkout>…]] [--requests 2000] [--rounds 7]
 *       [--pairs 2] [--ratio 1] [--batch <OTEL_BSP_MAX_EXPORT_BATCH_SIZE>[,…]] [--profile <dir> [--profile-interval <µs>]]
 *
 * Per tree (this one, then each `--base`, in a child process of its own, `--pairs` times in turn), the tree's own
 * modules (its `src/`, no build needed) make two stacks:
 * - off: a Fastify app whose chat route calls the tree's `callOptionsFor` (gateway/rpc.ts) and the tree's chat
 *   handler (createChatHandler, every stage, in-memory stores, a provider adapter answering at once, as
 *   bench/chat-pipeline.ts builds it) with the headers and context values it made and the call's signal from the
 *   tree's `LightAbortController` (as the in-process transport); the app has an onRequest and an onResponse hook as
 *   serve's gateway has (until 2026-11-27 it had none, and Node's AbortController: see bench/README.md, "Tracing
 *   cost: where the in-request inflation goes");
 * - on: the same with the tree's tracing started (src/lib/tracing.ts `startTracing`, the OTLP http/protobuf
 *   exporter posting to a sink in the parent process), its Fastify plugin registered, the core's tracing
 *   interceptor around the handler and the chat pipeline's trace stage in it (`tracing: true`).
 * Requests go in with `app.inject` one after the other; each round runs `--requests` requests off, then as many on,
 * then flushes the spans still queued (inside the "on" window, so the export is counted). CPU: `process.cpuUsage`
 * (the whole process: Fastify, the pipeline, the SDK, the exporter's HTTP client). Reported: CPU µs per request off
 * and on (median and best of the rounds), the median of the rounds' differences and the difference of the bests (on a
 * shared machine the best windows are the least disturbed ones), the garbage collections of each mode's windows (wall
 * time of all collections per request and mark-compacts per 1,000 requests, medians of the rounds: steadier under load
 * than CPU time, and what spans kept until their batch is exported cost), and the OTLP bytes exported per traced request.
 * `--ratio 0.1` samples one new trace in ten (`parentbased_traceidratio`). `--profile <dir>` writes a V8 CPU profile of
 * each child process into `<dir>` (sampled every `--profile-interval` µs, Node's default 1000; `node
 * bench/lib/profile-summary.mjs <file> --top 40`); with `--only on` (or `off`) the
 * measured rounds run that mode's windows alone (after the warm-up of both), so that two profiles can be compared.
 * `--solo` (with `--only`): the child builds and warms only that mode's stack (compare `--only on --solo` and `--only
 * off --solo` processes, both orders). `--node-flags "<flags>"` (space-separated) go to each child's node, e.g. `"--no-turbo-inlining"` (so a profile keeps
 * self time with the function that spends it) or `"--trace-gc --trace-gc-nvp"`; `--child-log <dir>` keeps each child's
 * stdout there (`child-<pair>-<tree index>.log`: what such flags print). `--heap-sample <dir>` writes a sampling heap
 * profile of the measured rounds there, objects already collected included (every `--heap-sample-interval` bytes,
 * 1024): what each function allocates (`node bench/lib/heap-summary.mjs`); the table's "JS heap bytes allocated" is
 * the total (heap growth plus what each collection freed, `v8.GCProfiler`). The main thread's and the other threads'
 * CPU per request (`/proc/self/task/<tid>/schedstat`; V8's GC helpers and compiler threads, which a CPU profile of the
 * main thread does not show) are reported off, and as the median of the rounds' differences on − off.
 */
import { spawn } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import type net from "node:net";
import { loadavg, tmpdir } from "node:os";
import { resolve } from "node:path";
import { PerformanceObserver, constants, type PerformanceEntry } from "node:perf_hooks";
import { GCProfiler, getHeapStatistics } from "node:v8";
import { pathToFileURL } from "node:url";
import { flag, num } from "./lib/args.js";
import { startHeapSampling } from "./lib/heap-sample.js";

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const load = () => loadavg().map((l) => l.toFixed(2)).join(" ");

interface ChildResult {
  off: number[];
  on: number[];
  /** Per window: garbage collection (all kinds) in µs of wall time per request, and mark-compacts per 1,000 requests. */
  offGc: number[];
  onGc: number[];
  offMajor: number[];
  onMajor: number[];
  /** Per window: bytes allocated on the JS heap per request (heap growth plus what each collection freed). */
  offAlloc: number[];
  onAlloc: number[];
  /** Per window: CPU µs per request of the main thread and of the other threads. */
  offMain: number[];
  onMain: number[];
  offOther: number[];
  onOther: number[];
}

async function child(): Promise<void> {
  const root = resolve(flag("tree")!);
  const requests = num("requests", 2000);
  const rounds = num("rounds", 7);
  const ratio = num("ratio", 1);
  const m = (p: string) => import(pathToFileURL(resolve(root, "src", p)).href);
  const [{ loadConfig }, { startTracing }, { callOptionsFor }, { createTracingInterceptor }, { createChatHandler }, { kCaller }, { createCatalog }, { BUILTIN_CATALOG }, { ProviderRegistry }, { createMemoryConcurrencyLimiter }, { createMemoryHealthMemory }, { createMemorySessionAffinity }, { LightAbortController }, { createContextValues }, pino, { default: Fastify }, api] =
    await Promise.all([
      m("config.ts"),
      m("lib/tracing.ts"),
      m("gateway/rpc.ts"),
      m("core/tracing-interceptor.ts"),
      m("core/chat/chat-handler.ts"),
      m("core/auth.ts"),
      m("core/catalog/catalog.ts"),
      m("core/catalog/builtin-catalog.ts"),
      m("core/chat/providers/index.ts"),
      m("lib/concurrency-limiter.ts"),
      m("lib/health-memory.ts"),
      m("lib/session-affinity.ts"),
      // The call's AbortController as the direct transport makes it (a tree without light-abort.ts: Node's).
      m("lib/light-abort.ts").catch(() => ({ LightAbortController: AbortController })),
      import("@connectrpc/connect"),
      import("pino"),
      import("fastify"),
      import("@opentelemetry/api"),
    ]);
  const logger = pino.default({ level: "silent" });
  const config = loadConfig({
    PORTICO_DATA_DIR: tmpdir(),
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: flag("sink")!,
    ...(ratio < 1 ? { OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: String(ratio) } : {}),
    ...(flag("batch") ? { OTEL_BSP_MAX_EXPORT_BATCH_SIZE: flag("batch") } : {}),
  });
  const tracing = await startTracing(config.tracing, logger);

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
    async *stream() {},
    upstreamBody: () => ({}),
  };
  const providers = new ProviderRegistry();
  (providers.get("groq") as { adapter: unknown }).adapter = adapter;
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
  const handlerOf = (traced: boolean) =>
    createChatHandler({
      presets: {} as never,
      generations: { record: () => undefined },
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
      health: createMemoryHealthMemory(),
      keepaliveMs: 15_000,
      accountRouting: async () => [],
      credentialOrder: "balanced",
      affinity: createMemorySessionAffinity({ ttlMs: 3_600_000, maxEntries: 10_000 }),
      responseCache: undefined,
      contentLog: undefined,
      tracing: traced,
    });
  const service = { typeName: "portico.chat.v1.ChatService" };
  const method = { name: "CreateChatCompletion", methodKind: "unary" };
  /** The core's side of one call: the RPC's headers in, the completion's JSON out (as the in-process transport's handler context). */
  const coreOf = (traced: boolean) => {
    const handler = handlerOf(traced);
    type Req = { header: Headers; signal: AbortSignal; message: unknown; contextValues: { set(k: unknown, v: unknown): unknown } };
    const call = async (req: Req) => {
      const values = req.contextValues;
      values.set(kCaller, caller);
      const ctx = { signal: req.signal, requestHeader: req.header, responseHeader: new Headers(), responseTrailer: new Headers(), values, timeoutMs: () => undefined };
      const res = await handler.createChatCompletion(req.message, ctx);
      return { stream: false, message: res, header: new Headers(), trailer: new Headers() };
    };
    const chain = traced ? createTracingInterceptor(config.tracing.sampler)(call as never) : call;
    // As the direct transport: the caller's context values (a tree handing the gateway's span over in them), else new ones.
    return (headers: Record<string, string>, message: unknown, contextValues?: Req["contextValues"]) => {
      const ac = new (LightAbortController as typeof AbortController)();
      return (chain as (r: Req & { service: unknown; method: unknown }) => Promise<{ message: { completionJson?: string } }>)({ header: new Headers(headers), signal: ac.signal, message, service, method, contextValues: contextValues ?? createContextValues() });
    };
  };
  const appOf = async (traced: boolean) => {
    const app = Fastify({ logger: false });
    // As src/gateway/app.ts: an onRequest and an onResponse hook of the gateway's own, traced or not (Fastify's
    // per-request machinery for each kind of hook — the response's listeners, the hook runners — is serve's either way).
    app.addHook("onRequest", (req, reply, done) => {
      reply.header("x-request-id", req.id);
      done();
    });
    app.addHook("onResponse", (_req, _reply, done) => done());
    if (traced) await app.register(tracing!.fastifyPlugin());
    const core = coreOf(traced);
    app.post("/api/v1/chat/completions", async (req, reply) => {
      const opts = callOptionsFor(req);
      const res = await core(opts.headers as Record<string, string>, { body: req.body, jsonText: true }, opts.contextValues);
      reply.header("content-type", "application/json; charset=utf-8");
      return res.message.completionJson;
    });
    await app.ready();
    return app;
  };
  // `--solo` (with `--only`): only that mode's stack is built and warmed, so the process is as a serve with tracing
  // on or off is (its code, its inline caches and its heap hold only that stack's; with both, the off stack runs with
  // what the on stack taught the shared code). Compare two such processes (`--only on --solo`, `--only off --solo`).
  const solo = process.argv.includes("--solo");
  const only0 = flag("only");
  const off = solo && only0 === "on" ? undefined : await appOf(false);
  const on = solo && only0 === "off" ? undefined : await appOf(true);
  const payload = JSON.stringify({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }] });
  const headers = { "content-type": "application/json", authorization: "Bearer sk-bench" };
  const provider = (api.trace.getTracerProvider() as unknown as { getDelegate(): { forceFlush(): Promise<void> } }).getDelegate();
  const cpu = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  // Garbage collections, as the observer hears of them (a window's are read after one more turn of the event loop).
  const gcSeen = { ms: 0, major: 0 };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gcSeen.ms += e.duration;
      if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) gcSeen.major++;
    }
  }).observe({ entryTypes: ["gc"] });
  const gcSince = async () => {
    await new Promise((r) => setImmediate(r));
    const seen = { ...gcSeen };
    gcSeen.ms = 0;
    gcSeen.major = 0;
    return seen;
  };
  const gcOf = { us: 0, major: 0, alloc: 0, mainUs: 0, otherUs: 0 };
  // CPU of the main thread and of the process's other threads (V8's GC helpers and compilers, libuv), ns on CPU
  // from /proc/self/task/<tid>/schedstat (Linux; zeros elsewhere).
  const threadCpu = () => {
    let main = 0;
    let other = 0;
    try {
      for (const tid of readdirSync("/proc/self/task")) {
        let ns = 0;
        try {
          ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);
        } catch {
          continue; // a thread that ended
        }
        if (Number(tid) === process.pid) main += ns;
        else other += ns;
      }
    } catch {
      // not Linux
    }
    return { main, other };
  };
  // Measured windows print their span of the monotonic clock in µs (a CPU profile's timestamps: samples split by window).
  let measuring = false;
  const used = () => getHeapStatistics().used_heap_size;
  const run = async (app: NonNullable<typeof off>, n: number, flush: boolean) => {
    await gcSince();
    const gcs = new GCProfiler();
    gcs.start();
    const used0 = used();
    const th0 = threadCpu();
    const t0 = cpu();
    const w0 = process.hrtime.bigint() / 1000n;
    for (let i = 0; i < n; i++) {
      const r = await app.inject({ method: "POST", url: "/api/v1/chat/completions", payload, headers });
      if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}: ${r.body}`);
    }
    if (flush) await provider.forceFlush();
    const spent = (cpu() - t0) / n;
    const th1 = threadCpu();
    gcOf.mainUs = (th1.main - th0.main) / 1000 / n;
    gcOf.otherUs = (th1.other - th0.other) / 1000 / n;
    if (measuring) process.stdout.write(`WINDOW ${flush ? "on" : "off"} ${w0} ${process.hrtime.bigint() / 1000n}\n`);
    const used1 = used();
    const freed = (gcs.stop()?.statistics ?? []).reduce((sum, g) => sum + g.beforeGC.heapStatistics.usedHeapSize - g.afterGC.heapStatistics.usedHeapSize, 0);
    gcOf.alloc = (used1 - used0 + freed) / n;
    const gc = await gcSince();
    gcOf.us = (gc.ms * 1000) / n;
    gcOf.major = (gc.major * 1000) / n;
    return spent;
  };
  // Warm-up (JIT) of both stacks.
  if (off) await run(off, 2000, false);
  if (on) await run(on, 2000, true);
  const result: ChildResult = { off: [], on: [], offGc: [], onGc: [], offMajor: [], onMajor: [], offAlloc: [], onAlloc: [], offMain: [], onMain: [], offOther: [], onOther: [] };
  const only = flag("only");
  // Seconds since start-up at which the measured rounds begin and end (for a profile's `--from`/`--to`).
  process.stdout.write(`MEASURED FROM ${process.uptime().toFixed(3)}\n`);
  measuring = true;
  // `--heap-sample <dir>`: a sampling heap profile of the measured rounds, objects collected since included (what was allocated, not what stayed).
  const heap = await startHeapSampling();
  for (let r = 0; r < rounds; r++) {
    result.off.push(only === "on" ? Number.NaN : await run(off!, requests, false));
    result.offGc.push(only === "on" ? Number.NaN : gcOf.us);
    result.offMajor.push(only === "on" ? Number.NaN : gcOf.major);
    result.offAlloc.push(only === "on" ? Number.NaN : gcOf.alloc);
    result.offMain.push(only === "on" ? Number.NaN : gcOf.mainUs);
    result.offOther.push(only === "on" ? Number.NaN : gcOf.otherUs);
    result.on.push(only === "off" ? Number.NaN : await run(on!, requests, true));
    result.onGc.push(only === "off" ? Number.NaN : gcOf.us);
    result.onMajor.push(only === "off" ? Number.NaN : gcOf.major);
    result.onAlloc.push(only === "off" ? Number.NaN : gcOf.alloc);
    result.onMain.push(only === "off" ? Number.NaN : gcOf.mainUs);
    result.onOther.push(only === "off" ? Number.NaN : gcOf.otherUs);
  }
  process.stdout.write(`MEASURED TO ${process.uptime().toFixed(3)}\n`);
  await heap?.stop(`heap-${only ?? "both"}-${process.pid}`);
  await tracing!.close();
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

async function main(): Promise<void> {
  const roots = [resolve(import.meta.dirname, ".."), ...(flag("base")?.split(",").map((b) => resolve(b)) ?? [])];
  // Each tree with each export batch size asked for (OTEL_BSP_MAX_EXPORT_BATCH_SIZE; the default when none).
  const batchSizes = flag("batch")?.split(",") ?? [undefined];
  const trees = roots.flatMap((root) => batchSizes.map((batch) => ({ root, batch })));
  const pairs = num("pairs", 2);
  // Bytes exported, per tree (the sink path's last part is the tree's index).
  const bytes = trees.map(() => 0);
  const sink = http.createServer((req, res) => {
    const i = Number(req.url?.split("/").at(-1));
    req.on("data", (d: Buffer) => (bytes[i] = (bytes[i] ?? 0) + d.length));
    req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
  });
  await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as net.AddressInfo).port}/v1/traces`;
  const pass = [...["requests", "rounds", "ratio", "only", "heap-sample", "heap-sample-interval"].flatMap((k) => (flag(k) ? [`--${k}`, k === "heap-sample" ? resolve(flag(k)!) : flag(k)!] : [])), ...(process.argv.includes("--solo") ? ["--solo"] : [])];
  const nameOf = (t: (typeof trees)[number]) => (t.batch ? `${t.root}, batch ${t.batch}` : t.root);
  const loadStart = load();
  console.log(`Node ${process.version}; ${num("requests", 2000)} requests per window, ${num("rounds", 7)} rounds off/on per process, ${pairs} pair(s); sampled ratio ${num("ratio", 1)}; load average at start ${loadStart}\n`);
  console.log("| pair | tree | CPU µs per request, off (median; best) | on (median; best) | added: median of rounds' differences | added: best on − best off | added % (best) | GC µs per request, off / on (median) | mark-compacts per 1,000 requests, off / on (median) | JS heap bytes allocated per request, off / on (median) | off, CPU µs per request: main thread / other threads (median) | added: main thread / other threads (median of rounds' differences) | exported bytes per request | load |");
  console.log("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
  for (let p = 1; p <= pairs; p++) {
    for (const [ti, { root: tree, batch }] of trees.entries()) {
      const before = bytes[ti]!;
      const out = await new Promise<string>((done, fail) => {
        const profile = flag("profile") ? ["--cpu-prof", "--cpu-prof-dir", resolve(flag("profile")!), ...(flag("profile-interval") ? ["--cpu-prof-interval", flag("profile-interval")!] : [])] : [];
        const nodeFlags = flag("node-flags")?.split(" ").filter(Boolean) ?? [];
        const c = spawn(process.execPath, [...profile, ...nodeFlags, resolve(import.meta.dirname, "../bin/run-ts.mjs"), resolve(import.meta.dirname, "tracing-cost.ts"), "--role", "child", "--tree", tree, "--sink", `${sinkUrl}/${ti}`, ...pass, ...(batch ? ["--batch", batch] : [])], {
          cwd: tree,
          stdio: ["ignore", "pipe", "inherit"],
        });
        let text = "";
        c.stdout.on("data", (d: Buffer) => (text += d.toString()));
        c.on("exit", (code) => {
          if (flag("child-log")) writeFileSync(resolve(flag("child-log")!, `child-${p}-${ti}.log`), text);
          return code === 0 ? done(text) : fail(new Error(`child for ${tree} exited with ${code}: ${text.slice(-2000)}`));
        });
      });
      const r = JSON.parse(/RESULT (.*)/.exec(out)![1]!) as ChildResult;
      // A mode left out (`--only`) came as null (NaN in JSON).
      r.off = r.off.map((v) => v ?? Number.NaN);
      r.on = r.on.map((v) => v ?? Number.NaN);
      const gc = [r.offGc, r.onGc].map((xs) => median(xs.map((v) => v ?? Number.NaN)).toFixed(1)).join(" / ");
      const majors = [r.offMajor, r.onMajor].map((xs) => median(xs.map((v) => v ?? Number.NaN)).toFixed(2)).join(" / ");
      const diffOf = (on: number[], off: number[]) => median(on.map((v, i) => (v ?? Number.NaN) - (off[i] ?? Number.NaN))).toFixed(1);
      const med = (xs: number[]) => median(xs.map((v) => v ?? Number.NaN)).toFixed(1);
      const threads = `${med(r.offMain)} / ${med(r.offOther)} | ${diffOf(r.onMain, r.offMain)} / ${diffOf(r.onOther, r.offOther)}`;
      const alloc = [r.offAlloc, r.onAlloc].map((xs) => median(xs.map((v) => v ?? Number.NaN)).toFixed(0)).join(" / ");
      const offM = median(r.off);
      const onM = median(r.on);
      const added = median(r.on.map((v, i) => v - r.off[i]!));
      const bestOff = Math.min(...r.off);
      const bestOn = Math.min(...r.on);
      const traced = r.on.length * num("requests", 2000) + 2000;
      console.log(`| ${p} | ${nameOf(trees[ti]!)} | ${offM.toFixed(1)}; ${bestOff.toFixed(1)} | ${onM.toFixed(1)}; ${bestOn.toFixed(1)} | ${added.toFixed(1)} | ${(bestOn - bestOff).toFixed(1)} | ${((100 * (bestOn - bestOff)) / bestOff).toFixed(1)} | ${gc} | ${majors} | ${alloc} | ${threads} | ${((bytes[ti]! - before) / traced).toFixed(0)} | ${load()} |`);
      console.error(`  rounds off ${r.off.map((v) => v.toFixed(1)).join(" ")}; on ${r.on.map((v) => v.toFixed(1)).join(" ")}`);
    }
  }
  console.log(`\nLoad average at end ${load()}.`);
  sink.close();
}

if (flag("role") === "child") await child();
else await main();
