/**
 * Closed-loop load: `concurrency` loops each send one request, wait for its answer, send the next. After
 * `warmupSeconds`, latencies are recorded for `seconds`; then the loops stop and finish their request.
 */
export interface LoadFigures {
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  max: number;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function closedLoop(opts: {
  concurrency: number;
  warmupSeconds: number;
  seconds: number;
  /** Sends one request on loop `conn`; resolves true when it succeeded. */
  send: (conn: number) => Promise<boolean>;
  /** Called as the measured window opens and closes (e.g. to read a process's CPU). */
  onWindow?: (edge: "start" | "end") => void;
}): Promise<LoadFigures> {
  const latencies: number[] = [];
  let errors = 0;
  let measuring = false;
  let stop = false;
  const loops = Array.from({ length: opts.concurrency }, async (_, conn) => {
    while (!stop) {
      const t0 = process.hrtime.bigint();
      const ok = await opts.send(conn);
      if (measuring) {
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
        if (!ok) errors++;
      }
    }
  });
  await new Promise((r) => setTimeout(r, opts.warmupSeconds * 1000));
  measuring = true;
  opts.onWindow?.("start");
  const t0 = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, opts.seconds * 1000));
  measuring = false;
  opts.onWindow?.("end");
  const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
  stop = true;
  await Promise.all(loops);
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    seconds: elapsed,
    rps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies[latencies.length - 1] ?? NaN,
  };
}
