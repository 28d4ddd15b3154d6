/**
 * Tracing off costs nothing (docs/operations.md, "Tracing"): without an OTLP endpoint, `portico serve` never
 * loads the OpenTelemetry SDK, the exporters or the Fastify instrumentation (only @opentelemetry/api, whose
 * no-op is all that runs). With an endpoint it loads them, and exports with the default protocol, OTLP
 * http/protobuf. Each run is a child process whose ESM resolve hook lists every module it resolved.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startOtlpReceiver, type OtlpReceiver } from "../../helpers/otlp-receiver.js";
import { waitFor } from "../../helpers/wait.js";

const CHILD = resolve(import.meta.dirname, "../../fixtures/tracing-modules-child.ts");
const SDK_MODULES = /@opentelemetry\/(sdk-trace-node|sdk-trace-base|resources|exporter-trace-otlp-(proto|http)|otlp-exporter-base|otlp-transformer|instrumentation)\/|@fastify\/otel\/|\/src\/lib\/otlp-(trace-encoder|span-processor)\.ts/;

function runChild(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string; loaded: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "portico-trace-off-"));
  const log = join(dir, "loaded.txt");
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_")));
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD], {
      env: {
        ...clean,
        LOADED_LOG: log,
        PORTICO_DATA_DIR: join(dir, "data"),
        HOST: "127.0.0.1",
        PORT: "0",
        PORTICO_GRPC_PORT: "0",
        PORTICO_EMBEDDED_HOST: "false",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", fail);
    child.on("close", (code) => {
      let loaded: string[] = [];
      try {
        loaded = readFileSync(log, "utf8").split("\n").filter(Boolean);
      } catch {
        /* nothing resolved */
      }
      rmSync(dir, { recursive: true, force: true });
      done({ code, stdout, stderr, loaded });
    });
  });
}

describe("tracing off: the SDK is not loaded", () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  it("no endpoint: only @opentelemetry/api of OpenTelemetry is resolved", async () => {
    const run = await runChild({});
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout.trim())).toEqual({ status: 200 });
    expect(run.loaded.some((u) => u.includes("/src/server.ts"))).toBe(true);
    expect(run.loaded.some((u) => /@opentelemetry\/api\//.test(u))).toBe(true);
    expect(run.loaded.filter((u) => SDK_MODULES.test(u))).toEqual([]);
  }, 120_000);

  it("an endpoint: the SDK is loaded and spans go out as OTLP http/protobuf by default", async () => {
    const run = await runChild({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: "50" });
    expect(run.code, run.stderr).toBe(0);
    expect(run.loaded.some((u) => /@opentelemetry\/sdk-trace-node\//.test(u))).toBe(true);
    // The SDK's OTLP/HTTP export delegate with Portico's span processor and encoder (src/lib/otlp-span-processor.ts,
    // src/lib/otlp-trace-encoder.ts).
    expect(run.loaded.some((u) => /@opentelemetry\/otlp-exporter-base\//.test(u))).toBe(true);
    expect(run.loaded.some((u) => u.includes("/src/lib/otlp-span-processor.ts"))).toBe(true);
    expect(run.loaded.some((u) => u.includes("/src/lib/otlp-trace-encoder.ts"))).toBe(true);
    const exp = await waitFor("an OTLP export", () => receiver.exports.find((e) => e.path === "/v1/traces"));
    expect(exp.contentType).toBe("application/x-protobuf");
    expect(exp.body.length).toBeGreaterThan(0);
  }, 120_000);
});
