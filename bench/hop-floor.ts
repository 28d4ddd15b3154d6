/**
 * The floor of the split hop (issue 24, "split ≤ 1.5× in-process"): what Node itself costs per unary call between
 * two processes, with no Portico code on either side, over HTTP/2 (node:http2 on both ends, a gRPC-shaped exchange:
 * a framed request, a response with `grpc-status` trailers) and over HTTP/1.1 keep-alive (node:http server, undici
 * Pool client, a request and a response of the same sizes). Each server is a process of its own; the client runs
 * here at concurrency `--concurrency`; the two kinds take turns in windows of `--seconds`, `--windows` times each
 * after a warm-up. Reported: CPU per call of the client and of the server (utime + stime from /proc), and calls/s.
 *
 * `--raw` adds a third kind: the same node:http2 server called by bench/lib/raw-h2-client.ts, a prototype unary gRPC
 * client speaking HTTP/2 on a bare `net.Socket` (no node:http2 on the client side): what the client's share of the
 * floor is without Node's HTTP/2 layer (a bound for a client of the gateway's own, not a client to ship).
 *
 *   node bin/run-ts.mjs bench/hop-floor.ts [--concurrency 32] [--seconds 2] [--windows 8] [--request-bytes 300] [--response-bytes 700] [--raw] [--only <name part>]
 */
import http from "node:http";
import http2 from "node:http2";
import { loadavg } from "node:os";
import { spawn, type ChildProcess } from "node:child_process";
import { Pool } from "undici";
import { num, flag } from "./lib/args.js";
import { bareGrpcServer, grpcFrame } from "./lib/bare-h2.js";
import { freePort, processCpuMs, repoRoot } from "./lib/processes.js";
import { rawH2Caller } from "./lib/raw-h2-client.js";

const requestBytes = num("request-bytes", 300);
const responseBytes = num("response-bytes", 700);


function serveH2(port: number): void {
  const answer = grpcFrame(responseBytes);
  const server = bareGrpcServer(answer);
  server.listen(port, "127.0.0.1", () => process.stdout.write("READY\n"));
}

function serveH1(port: number): void {
  const answer = Buffer.alloc(responseBytes, 0x61);
  const server = http.createServer((req, res) => {
    req.on("data", () => undefined);
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/proto", "content-length": answer.length });
      res.end(answer);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, "127.0.0.1", () => process.stdout.write("READY\n"));
}

async function startServer(kind: "h2" | "h1", port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["bin/run-ts.mjs", "bench/hop-floor.ts", "--serve", kind, "--port", String(port)], { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => d.toString().includes("READY") && resolve());
    child.once("exit", (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
  return child;
}

type Caller = () => Promise<void>;

function h2Caller(port: number): Caller {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  const body = grpcFrame(requestBytes);
  const headers = { ":method": "POST", ":path": "/portico.chat.v1.ChatService/CreateChatCompletion", "content-type": "application/grpc+proto", te: "trailers" };
  return () =>
    new Promise<void>((resolve, reject) => {
      const s = session.request(headers);
      let status: string | undefined;
      s.on("data", () => undefined);
      s.on("trailers", (t) => (status = t["grpc-status"] as string));
      s.on("error", reject);
      s.on("close", () => (status === "0" ? resolve() : reject(new Error(`grpc-status ${status}`))));
      s.end(body);
    });
}

function h1Caller(port: number, concurrency: number): Caller {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: concurrency, pipelining: 1 });
  const body = Buffer.alloc(requestBytes, 0x61);
  return async () => {
    const res = await pool.request({ method: "POST", path: "/portico.chat.v1.ChatService/CreateChatCompletion", headers: { "content-type": "application/proto" }, body });
    await res.body.arrayBuffer();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  };
}

/** Runs `call` at `concurrency` for `ms`; the number of calls completed. */
async function closedLoop(call: Caller, concurrency: number, ms: number): Promise<number> {
  const until = performance.now() + ms;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        await call();
        done++;
      }
    }),
  );
  return done;
}

const selfCpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

async function main(): Promise<void> {
  const concurrency = num("concurrency", 32);
  const seconds = num("seconds", 2);
  const windows = num("windows", 8);
  const load = () => loadavg().map((l) => l.toFixed(2)).join(" ");
  const startLoad = load();
  const [p2, p1, p3] = [await freePort(), await freePort(), await freePort()];
  const [s2, s1] = [await startServer("h2", p2), await startServer("h1", p1)];
  const raw = process.argv.includes("--raw");
  const s3 = raw ? await startServer("h2", p3) : undefined;
  const kinds = [
    { name: "HTTP/2 (node:http2 both ends, gRPC-shaped)", call: h2Caller(p2), server: s2, client: [] as number[], srv: [] as number[], rate: [] as number[] },
    { name: "HTTP/1.1 keep-alive (node:http server, undici Pool)", call: h1Caller(p1, concurrency), server: s1, client: [] as number[], srv: [] as number[], rate: [] as number[] },
  ];
  if (s3) {
    const headers = { ":method": "POST", ":scheme": "http", ":authority": `127.0.0.1:${p3}`, ":path": "/portico.chat.v1.ChatService/CreateChatCompletion", "content-type": "application/grpc+proto", te: "trailers" };
    kinds.push({ name: "HTTP/2, node:http2 server, raw-socket client (prototype)", call: ((c, body) => () => c(headers, body).then(() => undefined))(rawH2Caller(p3), grpcFrame(requestBytes)), server: s3, client: [], srv: [], rate: [] });
  }
  // `--only <substring>`: measure only the kinds whose name contains it (e.g. "raw-socket"; a kind alone in the
  // process, so no other kind's garbage is collected in its windows).
  const only = flag("only");
  const servers = kinds.map((k) => k.server);
  if (only) kinds.splice(0, kinds.length, ...kinds.filter((k) => k.name.includes(only)));
  try {
    for (const k of kinds) await closedLoop(k.call, concurrency, 1500); // warm-up
    for (let w = 0; w < windows; w++) {
      for (const k of w % 2 === 0 ? kinds : [...kinds].reverse()) {
        const c0 = selfCpuMs();
        const sv0 = processCpuMs([k.server.pid!]);
        const t0 = performance.now();
        const n = await closedLoop(k.call, concurrency, seconds * 1000);
        const t = performance.now() - t0;
        k.client.push((selfCpuMs() - c0) / n);
        k.srv.push((processCpuMs([k.server.pid!]) - sv0) / n);
        k.rate.push((n * 1000) / t);
      }
    }
  } finally {
    for (const server of servers) server.kill();
  }
  console.log(`Node ${process.version}; c=${concurrency}, ${windows} windows of ${seconds}s per kind taking turns; request ${requestBytes} B, response ${responseBytes} B; load ${startLoad} at start, ${load()} at end.\n`);
  console.log("| hop | calls/s | client CPU µs per call | server CPU µs per call | both |");
  console.log("|---|---:|---:|---:|---:|");
  for (const k of kinds) {
    const c = median(k.client) * 1000;
    const s = median(k.srv) * 1000;
    console.log(`| ${k.name} | ${median(k.rate).toFixed(0)} | ${c.toFixed(1)} | ${s.toFixed(1)} | ${(c + s).toFixed(1)} |`);
  }
  console.log("\n(medians of the windows; the server's CPU from /proc at the clock tick's resolution, so windows of ≥ 2 s)");
}

const serve = flag("serve");
if (serve === "h2") serveH2(num("port", 0));
else if (serve === "h1") serveH1(num("port", 0));
else await main();
