// Diagnostic only: on SIGUSR2 write memory figures of this process to $PROBE_OUT.<pid>.json
const v8 = require("node:v8");
const fs = require("node:fs");
process.on("SIGUSR2", () => {
  const before = process.memoryUsage().heapUsed;
  if (process.env.PROBE_GC && typeof globalThis.gc === "function") globalThis.gc();
  const mu = process.memoryUsage();
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, { size: +(s.space_size/1e6).toFixed(2), used: +(s.space_used_size/1e6).toFixed(2), phys: +(s.physical_space_size/1e6).toFixed(2) }]));
  const hs = v8.getHeapStatistics();
  const code = v8.getHeapCodeStatistics ? v8.getHeapCodeStatistics() : {};
  const out = { heapUsedBeforeGc: +(before/1e6).toFixed(2), mu: Object.fromEntries(Object.entries(mu).map(([k, v]) => [k, +(v/1e6).toFixed(2)])), spaces, malloced: hs.malloced_memory/1e6, peak_malloced: hs.peak_malloced_memory/1e6, external: hs.external_memory/1e6, code };
  fs.writeFileSync(`${process.env.PROBE_OUT}.${process.pid}.json`, JSON.stringify(out, null, 1));
  if (process.env.PROBE_SNAP) v8.writeHeapSnapshot(`${process.env.PROBE_OUT}.${process.pid}.${Date.now()}.heapsnapshot`);
});
