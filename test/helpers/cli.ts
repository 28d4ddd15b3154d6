import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import { resolve } from "node:path";

export const PORTICO_BIN = resolve(import.meta.dirname, "../../bin/portico.mjs");

/** Runs `portico <args>` to completion. */
export function runPortico(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [PORTICO_BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`portico ${args.join(" ")} timed out\n${stderr}`));
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
  });
}

/** Starts a long-running `portico <args>` and resolves once `ready(stderr+stdout)` returns a value. */
export function startPortico<T>(
  args: string[],
  env: Record<string, string>,
  ready: (output: string) => T | undefined,
  timeoutMs = 60_000,
): Promise<{ child: ChildProcess; value: T; output: () => string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [PORTICO_BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    let done = false;
    const check = () => {
      if (done) return;
      const value = ready(output);
      if (value !== undefined) {
        done = true;
        clearTimeout(timer);
        resolvePromise({ child, value, output: () => output });
      }
    };
    child.stdout!.on("data", (d) => {
      output += d;
      check();
    });
    child.stderr!.on("data", (d) => {
      output += d;
      check();
    });
    child.on("exit", (code) => {
      if (!done) {
        done = true;
        clearTimeout(timer);
        reject(new Error(`portico exited ${code} before ready:\n${output}`));
      }
    });
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      child.kill("SIGKILL");
      reject(new Error(`portico not ready in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
  });
}

/**
 * One HTTP request on a connection of its own (no keep-alive agent), so `portico serve`'s cluster hands each
 * one to the next worker.
 */
export function requestOnNewConnection(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: init.method ?? "GET", headers: init.headers, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    req.end(init.body);
  });
}

/** What `portico serve` prints on a fresh data folder (docs: README "Run it"): its addresses and first keys. */
export interface ServeBanner {
  child: ChildProcess;
  /** The API base URL as printed (`http://127.0.0.1:<port>/api/v1`). */
  base: string;
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  managementKey: string;
  apiKey: string;
  internId: string;
}

/**
 * Starts `portico serve` with `env` (PORT and PORTICO_GRPC_PORT 0 unless given) and resolves once it has printed
 * its banner and logged "serving" (one process) or "serving with worker processes" (the primary of several).
 * Afterwards the pipes keep flowing and their output is dropped (a test of a stuck reader pauses or destroys them).
 */
export function serveWithBanner(env: Record<string, string>): Promise<ServeBanner> {
  const child = spawn(process.execPath, [PORTICO_BIN, "serve"], {
    env: { ...process.env, PORT: "0", PORTICO_GRPC_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  return new Promise<ServeBanner>((resolvePromise, reject) => {
    const onData = (d: Buffer) => {
      out += d;
      const base = /API base URL:\s+(\S+)/.exec(out)?.[1];
      const managementKey = /management key:\s+(pk-v1-[0-9a-f]{64})/.exec(out)?.[1];
      const apiKey = /api key:\s+(pk-v1-[0-9a-f]{64})/.exec(out)?.[1];
      const internId = /intern id:\s+([0-9a-f-]{36})/.exec(out)?.[1];
      if (!base || !managementKey || !apiKey || !internId || !/"msg":"serving/.test(out)) return;
      child.stdout!.off("data", onData);
      child.stderr!.off("data", onData);
      child.off("exit", onExit);
      child.stdout!.resume();
      child.stderr!.resume();
      resolvePromise({ child, base, origin: new URL(base).origin, managementKey, apiKey, internId });
    };
    const onExit = (code: number | null) => reject(new Error(`serve exited ${code} before ready:\n${out}`));
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", onExit);
  });
}
