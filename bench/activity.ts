/**
 * The activity aggregation (GET /api/v1/activity, src/core/activity/activity-repository.ts) on a fresh SQLite
 * and a fresh PostgreSQL database holding `--rows` generations of the measured organization spread over 31 UTC
 * days (20 models on 4 providers, 5 keys, 2 workspaces) and as many of another organization: the one aggregate
 * query per grouping, median and slowest of `--runs` runs after one warm-up.
 *
 *   node bin/run-ts.mjs bench/activity.ts [--rows 100000] [--runs 7]
 */
import { randomUUID } from "node:crypto";
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { createActivityRepository, type ActivityGrouping } from "../src/core/activity/activity-repository.js";
import { freshPostgres, freshSqlite } from "../test/helpers/db.js";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

const DAY = 86_400_000;

async function main(): Promise<void> {
  const rows = arg("rows", 100_000);
  const runs = arg("runs", 7);
  console.log(`activity aggregation: ${rows} generations per organization, 2 organizations, ${runs} runs; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  const now = Date.now();
  const today = now - (now % DAY);
  for (const [name, fresh] of [["sqlite", freshSqlite], ["postgresql", freshPostgres]] as const) {
    const h = await fresh();
    try {
      for (const org of ["org-measured", "org-other"]) {
        for (let start = 0; start < rows; start += 2_000) {
          const data = Array.from({ length: Math.min(2_000, rows - start) }, (_, k) => {
            const i = start + k;
            return {
              id: `gen-${randomUUID()}`, organizationId: org, workspaceId: `ws-${i % 2}`, keyHash: String(i % 5).repeat(64), requestedModel: "m",
              model: `model-${i % 20}`, provider: `provider-${i % 4}`, credentialSource: i % 7 === 0 ? "byok" : "shared", streamed: false,
              promptTokens: 100 + (i % 50), completionTokens: 20 + (i % 30), totalTokens: 150, latencyMs: 5, status: "success", attempts: 1,
              createdAt: new Date(today - 31 * DAY + ((i * 7919) % (31 * DAY))), costFemtoUsd: BigInt(1_000_000_000 + i), upstreamCostFemtoUsd: BigInt(1_000_000_000 + i),
            };
          });
          await h.db.generation.createMany({ data });
        }
      }
      const repo = createActivityRepository({ db: h.db, provider: h.provider });
      const window = { organizationId: "org-measured", from: new Date(today - 30 * DAY), to: new Date(today) };
      for (const grouping of ["endpoint", "model", "provider", "key", "workspace"] as ActivityGrouping[]) {
        await repo.totals({ ...window, grouping });
        const times: number[] = [];
        let count = 0;
        for (let r = 0; r < runs; r++) {
          const t = performance.now();
          count = (await repo.totals({ ...window, grouping })).length;
          times.push(performance.now() - t);
        }
        times.sort((a, b) => a - b);
        console.log(`${name}\t${grouping}\t${count} rows\tmedian ${times[Math.floor(times.length / 2)]!.toFixed(1)} ms\tslowest ${times.at(-1)!.toFixed(1)} ms`);
      }
    } finally {
      await h.close();
    }
  }
}

await main();
