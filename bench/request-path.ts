/**
 * CPU of per-request pieces of `portico serve`'s chat path that sit outside the core's pipeline (issue 24, "the
 * per-request path"), this tree against another checkout's `src/` (no build needed), taking turns:
 *
 * - the gateway's "request completed" line (src/log.ts's logger, a per-request child as Fastify makes one, the line
 *   the onResponse hook writes), into a sink that drops it;
 * - the API key's hash (src/core/identity/keys.ts `hashSecret`), as the auth interceptor hashes every request's key;
 * - an in-process unary call (src/core/direct-transport.ts) with the gateway's headers as a plain record and a
 *   handler reading the nine headers a chat request reads (authorization, the time budget, the six session headers).
 *
 * CPU of this process per operation (`process.cpuUsage`), best of `--repeats`; steadier on a loaded machine than the
 * end-to-end bench, which cannot resolve a few µs.
 *
 *   node bin/run-ts.mjs bench/request-path.ts [--base /work/base-main] [--ops 100000] [--pairs 3] [--repeats 3]
 */
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { flag } from "./lib/args.js";

const ops = Number(flag("ops") ?? 100_000);
const pairs = Number(flag("pairs") ?? 3);
const repeats = Number(flag("repeats") ?? 3);
const base = flag("base");

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

interface Pieces {
  logLine(): void;
  hash(): void;
  unary(): Promise<void>;
}

async function piecesAt(root: string): Promise<Pieces> {
  const m = (p: string) => import(pathToFileURL(resolve(root, "src", p)).href);
  const [{ createLogger }, { hashSecret }, { createDirectTransport }, { createClient }, { HealthService }] = await Promise.all([
    m("log.ts"),
    m("core/identity/keys.ts"),
    m("core/direct-transport.ts"),
    import("@connectrpc/connect"),
    m("gen/portico/health/v1/health_service_pb.ts"),
  ]);
  const gateway = createLogger({ level: "info", destination: { write() {} } }).child({ component: "gateway" });
  const key = `pk-v1-${"5e".repeat(32)}`;
  const names = ["authorization", "x-request-timeout-ms", "x-session-id", "x-claude-code-session-id", "session-id", "session_id", "x-opencode-session", "x-session-affinity"];
  const transport = createDirectTransport(
    (router: { service(s: unknown, impl: unknown): unknown }) =>
      router.service(HealthService, {
        check: (_req: unknown, ctx: { requestHeader: Headers }) => {
          for (const n of names) ctx.requestHeader.get(n);
          return { ready: true, instanceId: "x" };
        },
      }),
    [
      // As the auth interceptor reads the key.
      (next: (r: { header: Headers }) => unknown) => (req: { header: Headers }) => (req.header.get("authorization"), next(req)),
    ],
  );
  const client = createClient(HealthService, transport) as unknown as { check(input: object, options: object): Promise<unknown> };
  return {
    logLine() {
      const log = gateway.child({ reqId: "5c3d2f7e-1234-4cde-9abc-0123456789ab" });
      log.info({ method: "POST", route: "/api/v1/chat/completions", status: 200, ms: 1.2 }, "request completed");
    },
    hash() {
      hashSecret(key);
    },
    async unary() {
      await client.check({}, { headers: { "x-request-id": "5c3d2f7e-1234-4cde-9abc-0123456789ab", authorization: `Bearer ${key}` } });
    },
  };
}

async function measure(p: Pieces): Promise<Record<keyof Pieces, number>> {
  const best = { logLine: Infinity, hash: Infinity, unary: Infinity };
  for (let r = 0; r < repeats; r++) {
    for (const name of ["logLine", "hash"] as const) {
      for (let i = 0; i < 2_000; i++) p[name]();
      const t0 = cpuUs();
      for (let i = 0; i < ops; i++) p[name]();
      best[name] = Math.min(best[name], (cpuUs() - t0) / ops);
    }
    for (let i = 0; i < 2_000; i++) await p.unary();
    const t0 = cpuUs();
    for (let i = 0; i < ops / 4; i++) await p.unary();
    best.unary = Math.min(best.unary, (cpuUs() - t0) / (ops / 4));
  }
  return best;
}

const trees: Array<[string, Pieces]> = [["this tree", await piecesAt(resolve(import.meta.dirname, ".."))]];
if (base) trees.push([`base (${base})`, await piecesAt(base)]);
console.log(`load average at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}; ${ops} operations (unary calls: ${ops / 4}), best of ${repeats}\n`);
console.log("| pair | tree | log line + child µs | key hash µs | in-process unary call µs |");
console.log("|---|---|---:|---:|---:|");
for (let pair = 1; pair <= pairs; pair++) {
  for (const [name, p] of pair % 2 === 1 ? trees : [...trees].reverse()) {
    const r = await measure(p);
    console.log(`| ${pair} | ${name} | ${r.logLine.toFixed(3)} | ${r.hash.toFixed(3)} | ${r.unary.toFixed(3)} |`);
  }
}
console.log(`\nload average at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
