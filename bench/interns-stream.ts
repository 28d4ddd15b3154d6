/**
 * Intern streaming benchmark (issue #6). One process holds what we ship in `portico serve`: core +
 * gateway over the in-memory transport, a fresh SQLite database, and the core's h2c listener; an
 * in-process bench host dials the core's InternLinkService over real gRPC (HTTP/2 loopback) and
 * plays the agent, stamping every content chunk with its emit time. The load client runs as a
 * separate process (bench/interns-client.ts) so its CPU is not ours.
 *
 * Reports: added time to first chunk (client arrival − agent emit), per-chunk latency on a paced
 * stream, CPU per relayed chunk (this process: gateway + core + link + host side), chunks/s through
 * 1, 200 and 500 concurrent streams with loss/duplicate/reorder checks, and heap per paused session
 * with 1,000 sessions paused.
 *
 *   node --expose-gc bin/run-ts.mjs bench/interns-stream.ts [--quick]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const quick = process.argv.includes("--quick");
const REPO = resolve(import.meta.dirname, "..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const [{ openDatabase }, { createCore }, { startCoreServer }, { buildGateway }, { bootstrap }, { createLogger }, { createMetrics }, { loadConfig }, { createInternRepository }] =
    await Promise.all([
      import("../src/db/client.js"),
      import("../src/core/core.js"),
      import("../src/core/server.js"),
      import("../src/gateway/app.js"),
      import("../src/core/identity/bootstrap.js"),
      import("../src/log.js"),
      import("../src/lib/metrics.js"),
      import("../src/config.js"),
      import("../src/core/interns/intern-repository.js"),
    ]);
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-interns-"));
  const config = loadConfig({
    PORTICO_DATA_DIR: join(dir, "data"),
    PORTICO_INTERN_RATE_LIMIT: "100000000",
    PORTICO_INTERN_START_TIMEOUT_MS: "60000",
    PORTICO_LINK_LIVENESS_TIMEOUT_MS: "30000",
  });
  const logger = createLogger({ level: "warn" });
  const metrics = createMetrics();
  const database = await openDatabase({ dataDir: config.dataDir });
  const core = await createCore({ database, config, logger, metrics });
  const coreServer = await startCoreServer(core, { host: "127.0.0.1", port: 0, logger });
  const gateway = await buildGateway({ transport: core.createInMemoryTransport(), logger, metrics, bodyLimitBytes: config.bodyLimitBytes, brand: config.brand });
  await gateway.listen({ host: "127.0.0.1", port: 0 });
  const addr = gateway.server.address();
  const base = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
  const boot = await bootstrap(database.db, []);
  const { intern, hostToken } = await createInternRepository(database.db).createIntern({ workspaceId: boot.workspace_id, name: "bench" });

  // The stand-in host runs as its own process; its CPU is added to ours per scenario.
  const hostProc = spawn(
    process.execPath,
    [join(REPO, "bin/run-ts.mjs"), join(REPO, "bench/interns-bench-host.ts"), "--core", coreServer.url, "--token", hostToken],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const hostLines: string[] = [];
  let hostWaiter: ((line: string) => void) | undefined;
  let hostBuf = "";
  hostProc.stdout!.on("data", (d) => {
    hostBuf += d;
    let nl: number;
    while ((nl = hostBuf.indexOf("\n")) >= 0) {
      const line = hostBuf.slice(0, nl);
      hostBuf = hostBuf.slice(nl + 1);
      if (hostWaiter) {
        const w = hostWaiter;
        hostWaiter = undefined;
        w(line);
      } else hostLines.push(line);
    }
  });
  const hostLine = () => new Promise<string>((r) => (hostLines.length ? r(hostLines.shift()!) : (hostWaiter = r)));
  if ((await hostLine()) !== "ready") throw new Error("bench host did not attach");
  const hostCpu = async (): Promise<number> => {
    hostProc.stdin!.write("cpu\n");
    const u = JSON.parse(await hostLine()) as { user: number; system: number };
    return u.user + u.system;
  };

  const client = (prompt: string, streams: number, repeat = 1, mode = "self-drive"): Promise<any> =>
    new Promise((resolvePromise, reject) => {
      const child = spawn(
        process.execPath,
        [join(REPO, "bin/run-ts.mjs"), join(REPO, "bench/interns-client.ts"), "--base", base, "--intern", intern.id, "--key", boot.api_key!, "--prompt", prompt, "--streams", String(streams), "--repeat", String(repeat), "--mode", mode],
        { stdio: ["ignore", "pipe", "inherit"] },
      );
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      child.on("close", (code) => (code === 0 ? resolvePromise(JSON.parse(out.trim().split("\n").at(-1)!)) : reject(new Error(`client exited ${code}`))));
    });

  const only = process.argv.includes("--only") ? process.argv[process.argv.indexOf("--only") + 1] : undefined;
  const measure = async (name: string, prompt: string, streams: number, repeat = 1) => {
    if (only && !name.includes(only)) return;
    await sleep(200);
    const cpu0 = process.cpuUsage();
    const host0 = await hostCpu();
    const r = await client(prompt, streams, repeat);
    const cpu = process.cpuUsage(cpu0);
    const coreUs = cpu.user + cpu.system;
    const hostUs = (await hostCpu()) - host0;
    // The client's process start-up is outside; our CPU includes idle timers, so keep runs long.
    const row = {
      scenario: name,
      streams,
      chunks: r.chunks,
      lost: r.lost,
      dup: r.dup,
      reordered: r.reordered,
      non200: r.non200,
      notDone: r.notDone,
      chunksPerSecond: Math.round(r.chunksPerSecond),
      chunkLatencyP50ms: +r.chunkLatencyMs.p50.toFixed(3),
      chunkLatencyP99ms: +r.chunkLatencyMs.p99.toFixed(3),
      firstChunkAddedP50ms: +r.firstChunkAddedMs.p50.toFixed(3),
      firstChunkAddedP99ms: +r.firstChunkAddedMs.p99.toFixed(3),
      requestToFirstChunkP50ms: +r.firstChunkFromRequestMs.p50.toFixed(3),
      cpuUsPerChunkGatewayCore: +(coreUs / Math.max(1, r.chunks)).toFixed(1),
      cpuUsPerChunkHost: +(hostUs / Math.max(1, r.chunks)).toFixed(1),
    };
    console.log(JSON.stringify(row));
    return row;
  };

  // warm-up
  await client("burst 2000 16", 4);

  await measure("first chunk (sequential runs of 1 chunk)", "burst 1 16", 1, quick ? 50 : 300);
  await measure("paced stream (1 chunk / 2 ms)", `paced ${quick ? 500 : 2000} 2`, 1);
  await measure("one stream, burst", `burst ${quick ? 20000 : 100000} 16`, 1);
  await measure("200 concurrent streams, burst", `burst ${quick ? 200 : 1000} 16`, 200);
  await measure("500 concurrent streams, burst", `burst ${quick ? 100 : 400} 16`, 500);

  // Memory per paused session: 1,000 runs paused on a question (the core keeps their ActiveRun, the
  // gateway nothing once [DONE] is written; the bench host's own per-run state is in this process too).
  const gc = (globalThis as { gc?: () => void }).gc;
  const heap = async () => {
    for (let i = 0; i < 3; i++) {
      gc?.();
      await sleep(50);
    }
    return process.memoryUsage().heapUsed;
  };
  if (only && !"paused sessions".includes(only)) {
    hostProc.stdin!.write("quit\n");
    await gateway.close();
    await coreServer.close();
    await core.close();
    await database.close();
    rmSync(dir, { recursive: true, force: true });
    return;
  }
  const paused = quick ? 200 : 1000;
  await client("ask", 100, 1, "manual"); // warm the paths (and the allocator) before the baseline
  const warm = await database.db.internRun.count({ where: { state: "paused" } });
  const before = await heap();
  const r = await client("ask", 100, paused / 100, "manual");
  const after = await heap();
  const activeRuns = (await database.db.internRun.count({ where: { state: "paused" } })) - warm;
  console.log(
    JSON.stringify({
      scenario: "paused sessions",
      paused: activeRuns,
      non200: r.non200,
      heapDeltaBytes: after - before,
      bytesPerPausedSession: Math.round((after - before) / Math.max(1, activeRuns)),
      gcExposed: gc !== undefined,
    }),
  );

  hostProc.stdin!.write("quit\n");
  await gateway.close();
  await coreServer.close();
  await core.close();
  await database.close();
  rmSync(dir, { recursive: true, force: true });
}

await main();
