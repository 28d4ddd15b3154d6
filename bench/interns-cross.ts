/**
 * Cross-instance intern latency (issue 10). Real processes on PostgreSQL + Redis: two `portico core`
 * and two `portico gateway` (gateway N dials core N); the stand-in host (bench/interns-bench-host.ts)
 * attaches to core 1. "same instance" requests go through gateway 1 → core 1 (holds the link);
 * "cross instance" requests go through gateway 2 → core 2, which forwards the StreamChat call to
 * core 1 over gRPC (the Redis lease names it). Measured from this process (keep-alive node:http):
 *
 *   - first chunk: request sent → first content chunk, prompt "burst 1 16" (sequential runs)
 *   - per chunk: arrival − agent emit time on a paced stream (1 chunk / 2 ms)
 *   - answer: a run paused on a question through gateway 1, answered through gateway N;
 *     answer sent → first content chunk of the continuation
 *
 *   node bin/run-ts.mjs bench/interns-cross.ts [--runs 200] [--chunks 1000]
 * Needs PostgreSQL (BENCH_PG_URL, default postgresql://postgres@127.0.0.1:5432/postgres) and Redis
 * (REDIS_URL, default redis://127.0.0.1:6379); creates and drops its own database.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { createParser } from "eventsource-parser";
import pg from "pg";

const REPO = resolve(import.meta.dirname, "..");
const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const RUNS = Number(arg("runs", "200"));
const CHUNKS = Number(arg("chunks", "1000"));
const now = () => performance.timeOrigin + performance.now();
const agent = new Agent({ keepAlive: true, maxSockets: 4 });

function startProc(args: string[], env: Record<string, string>, ready: (out: string) => string | undefined, bin = "bin/portico.mjs"): Promise<{ child: ChildProcess; value: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [join(REPO, bin), ...args], { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    const on = (d: Buffer) => {
      out += d;
      const v = ready(out);
      if (v !== undefined) {
        child.stdout!.off("data", on);
        child.stderr!.off("data", on);
        child.stdout!.resume();
        child.stderr!.resume();
        resolvePromise({ child, value: v });
      }
    };
    child.stdout!.on("data", on);
    child.stderr!.on("data", on);
    child.once("exit", (code) => reject(new Error(`${args[0]} exited ${code}:\n${out}`)));
  });
}

const urlOf = (marker: string) => (out: string) => {
  for (const line of out.split("\n")) if (line.includes(marker)) return /"url":"(http:\/\/[^"]+?)(\/api\/v1)?"/.exec(line)?.[1];
  return undefined;
};

interface Stream {
  status: number;
  firstContentMs: number | undefined;
  latencies: number[];
  sessionId: string | undefined;
  toolCallId: string | undefined;
}

function chat(base: string, internId: string, key: string, body: unknown): Promise<Stream> {
  return new Promise((resolvePromise, reject) => {
    const sent = now();
    const s: Stream = { status: 0, firstContentMs: undefined, latencies: [], sessionId: undefined, toolCallId: undefined };
    const parser = createParser({
      onEvent(ev) {
        if (ev.data === "[DONE]") return;
        const c = JSON.parse(ev.data);
        const t = now();
        const content = c.choices?.[0]?.delta?.content;
        if (typeof content === "string") {
          if (s.firstContentMs === undefined) s.firstContentMs = t - sent;
          const emit = Number(content.split("|")[1]);
          if (Number.isFinite(emit)) s.latencies.push(t - emit);
        }
        const call = c.choices?.[0]?.delta?.tool_calls?.[0];
        if (call?.id) s.toolCallId = call.id;
        if (c.session_id) s.sessionId = c.session_id;
      },
    });
    const req = request(
      `${base}/api/v1/interns/${internId}/chat/completions`,
      { method: "POST", agent, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" } },
      (res) => {
        s.status = res.statusCode ?? 0;
        res.setEncoding("utf8");
        res.on("data", (d: string) => parser.feed(d));
        res.on("end", () => resolvePromise(s));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};
const fmt = (xs: number[]) => `${pct(xs, 50).toFixed(2)} / ${pct(xs, 99).toFixed(2)}`;

async function main(): Promise<void> {
  const adminUrl = process.env.BENCH_PG_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
  const dbName = `portico_bench_${randomBytes(5).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${dbName}"`);
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${dbName}`;
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-cross-"));
  const procs: ChildProcess[] = [];
  try {
    const env = {
      DATABASE_URL: dbUrl.toString(),
      REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
      PORTICO_REDIS_PREFIX: `bench-${randomBytes(4).toString("hex")}:`,
      PORTICO_DATA_DIR: join(dir, "data"),
      PORTICO_MASTER_KEY: randomBytes(32).toString("hex"),
      PORTICO_EMBEDDED_HOST: "false",
      PORTICO_LOG_LEVEL: "info",
      HOST: "127.0.0.1",
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_INTERN_RATE_LIMIT: "100000000",
      PORTICO_INTERN_MAX_PAUSED_PER_KEY: "10000",
    };
    const boot = await new Promise<any>((res, rej) => {
      const c = spawn(process.execPath, [join(REPO, "bin/portico.mjs"), "admin", "bootstrap", "--json"], { env: { ...process.env, ...env } });
      let out = "";
      c.stdout.on("data", (d) => (out += d));
      c.stderr.on("data", (d) => (out += d));
      c.on("exit", (code) => (code === 0 ? res(JSON.parse(out)) : rej(new Error(`bootstrap exited ${code}: ${out}`))));
    });
    const started = await Promise.all([
      startProc(["core"], { ...env, PORTICO_INSTANCE_ID: "bench-core-1" }, urlOf("core listening")),
      startProc(["core"], { ...env, PORTICO_INSTANCE_ID: "bench-core-2" }, urlOf("core listening")),
    ]);
    procs.push(...started.map((p) => p.child));
    const [core1, core2] = started.map((p) => p.value) as [string, string];
    const gws = await Promise.all([startProc(["gateway", "--core", core1], env, urlOf("gateway listening")), startProc(["gateway", "--core", core2], env, urlOf("gateway listening"))]);
    procs.push(...gws.map((p) => p.child));
    const [gw1, gw2] = gws.map((p) => p.value) as [string, string];
    const host = await startProc(
      ["bench/interns-bench-host.ts", "--core", core1, "--token", boot.intern_host_token],
      env,
      (out) => (out.includes("ready") ? "ready" : undefined),
      "bin/run-ts.mjs",
    );
    procs.push(host.child);
    const internId = boot.intern_id as string;
    const key = boot.api_key as string;

    const rows: string[] = [];
    for (const [label, base] of [
      ["same instance (gateway 1 → core 1)", gw1],
      ["cross instance (gateway 2 → core 2 → core 1)", gw2],
    ] as const) {
      for (let i = 0; i < 20; i++) await chat(base, internId, key, { stream: true, messages: [{ role: "user", content: "burst 1 16" }] });
      const first: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const s = await chat(base, internId, key, { stream: true, messages: [{ role: "user", content: "burst 1 16" }] });
        if (s.status !== 200 || s.firstContentMs === undefined) throw new Error(`run failed: ${s.status}`);
        first.push(s.firstContentMs);
      }
      const paced = await chat(base, internId, key, { stream: true, messages: [{ role: "user", content: `paced ${CHUNKS} 2` }] });
      if (paced.latencies.length !== CHUNKS) throw new Error(`paced stream lost chunks: ${paced.latencies.length}`);
      const answer: number[] = [];
      for (let i = 0; i < Math.min(RUNS, 100); i++) {
        const q = await chat(gw1, internId, key, { stream: true, approval_mode: "manual", messages: [{ role: "user", content: "ask" }] });
        const a = await chat(base, internId, key, {
          stream: true,
          session_id: q.sessionId,
          messages: [{ role: "tool", tool_call_id: q.toolCallId, content: "allow_once" }],
        });
        if (a.status !== 200 || a.firstContentMs === undefined) throw new Error(`answer failed: ${a.status}`);
        answer.push(a.firstContentMs);
      }
      rows.push(`| ${label} | ${fmt(first)} | ${fmt(paced.latencies.slice(50))} | ${fmt(answer)} |`);
    }
    process.stdout.write(
      [
        `runs ${RUNS}, paced chunks ${CHUNKS}, answers ${Math.min(RUNS, 100)}; ms p50 / p99`,
        "| path | first content chunk from request | per chunk (arrival − emit) | answer → first continuation chunk |",
        "|---|---|---|---|",
        ...rows,
        "",
      ].join("\n"),
    );
  } finally {
    for (const p of procs.reverse()) p.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 1500));
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
    await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => undefined);
    await admin.end();
    rmSync(dir, { recursive: true, force: true });
    agent.destroy();
  }
}

await main();
