/**
 * Cost of one intern-turn rate-limit check while REDIS_URL points at nothing (Redis down):
 * `node bin/run-ts.mjs bench/redis-outage.ts [--takes N]`. Each check must fail over to the
 * per-process bucket at once instead of waiting for Redis.
 */
import { createTurnLimiter } from "../src/lib/turn-limiter.js";

const flag = process.argv.indexOf("--takes");
const takes = flag > 0 ? Number(process.argv[flag + 1]) : 2000;
const limiter = createTurnLimiter({ points: 1e9, durationSeconds: 60, redisUrl: "redis://127.0.0.1:1" });
const times: number[] = [];
for (let i = 0; i < takes; i++) {
  const t0 = performance.now();
  await limiter.take(`key-${i % 16}`);
  times.push(performance.now() - t0);
}
times.sort((a, b) => a - b);
const q = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!.toFixed(3);
console.log(`Redis unreachable, ${takes} checks: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms`);
await limiter.close();
process.exit(0);
