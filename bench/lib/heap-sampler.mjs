/**
 * A sampling heap profile of a server process under load, what it allocated (objects already collected included),
 * per request it served: preload it into the process,
 *
 *   node --import=<abs path>/bench/lib/heap-sampler.mjs …
 *
 * Units: HTTP/1 requests the process began serving (diagnostics channel `http.server.request.start`) plus HTTP/2
 * streams its servers' sessions received (`session` → `stream`); the split's core counts its gRPC calls, the
 * gateway and `serve` their HTTP requests. Sampling starts once `HEAP_SAMPLE_AFTER` units (default 3000: start-up
 * and the JIT's warm-up left out) have been counted and stops at exit; the profile goes to `HEAP_SAMPLE_DIR`
 * (default `<tmp>/heap-samples`) as `heap-<role>-<pid>.heapprofile` (role: the `portico` command, `serve`, `core` or
 * `gateway`, else `node`), with `heap-<role>-<pid>.units` holding the units counted while sampling. Read them with
 * `node bench/lib/heap-summary.mjs <file> --units-a <units>`. `HEAP_SAMPLE_INTERVAL` bytes (default 4096) between
 * samples. Without `--profile`, chat-hot-path.ts loads it through the environment:
 * `--serve-env NODE_OPTIONS=--import=<abs path>,HEAP_SAMPLE_DIR=<dir>` (and `--base-env …` for the base).
 */
import { Session } from "node:inspector";
import diagnostics from "node:diagnostics_channel";
import http2 from "node:http2";
import { mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = process.env.HEAP_SAMPLE_DIR || join(tmpdir(), "heap-samples");
const after = Number(process.env.HEAP_SAMPLE_AFTER ?? 3000);
const interval = Number(process.env.HEAP_SAMPLE_INTERVAL ?? 4096);
const role = process.argv.slice(2).find((a) => a === "serve" || a === "core" || a === "gateway") ?? "node";
let units = 0;
let unitsAtStart = -1;
const session = new Session();

function count() {
  units++;
  if (unitsAtStart < 0 && units >= after) {
    unitsAtStart = units;
    session.connect();
    session.post("HeapProfiler.startSampling", { samplingInterval: interval, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  }
}

diagnostics.subscribe("http.server.request.start", count);
for (const name of ["createServer", "createSecureServer"]) {
  const make = http2[name];
  http2[name] = function (...args) {
    const server = make.apply(this, args);
    server.on("session", (s) => s.on("stream", count));
    return server;
  };
}

process.on("exit", () => {
  if (unitsAtStart < 0) return;
  // The main thread's session answers synchronously.
  session.post("HeapProfiler.stopSampling", (err, res) => {
    if (err) return;
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `heap-${role}-${process.pid}.heapprofile`), JSON.stringify(res.profile));
    writeFileSync(join(dir, `heap-${role}-${process.pid}.units`), String(units - unitsAtStart));
  });
});
