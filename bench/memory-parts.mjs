/**
 * What one serving process's memory is made of (issue 12's idle-memory goal): loads the compiled
 * modules of a `portico serve` worker step by step in a plain Node process (no TypeScript loader, which
 * would add its own thread) and prints resident memory after a full GC at each step.
 *
 *   npm run -s build && node --expose-gc --max-semi-space-size=4 bench/memory-parts.mjs
 *
 * `--max-semi-space-size=4` is what `portico serve` gives its workers. The steps: bare Node; the database
 * module; Prisma connected with one query on a fresh SQLite file; the core; the gateway. A final line is
 * the primary of `serve` alone (config, logger, cluster and shutdown modules) measured in a child.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";

if (typeof globalThis.gc !== "function") {
  console.error("run with node --expose-gc");
  process.exit(2);
}
const dist = new URL("../dist/", import.meta.url);
const row = (label) => {
  globalThis.gc();
  const m = process.memoryUsage();
  const anon = Number(/RssAnon:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1] ?? 0) / 1024;
  const mb = (n) => (n / 1048576).toFixed(1);
  return `| ${label} | ${mb(m.rss)} | ${anon.toFixed(1)} | ${mb(m.heapUsed)} | ${mb(m.heapTotal)} |`;
};

if (process.argv[2] === "--primary") {
  for (const m of ["config.js", "log.js", "cluster/primary.js", "cluster/ipc.js", "cli/shutdown.js"]) await import(new URL(m, dist).href);
  await import("commander");
  console.log(row("`serve` primary's modules (config, logger, cluster, shutdown, commander)"));
  process.exit(0);
}

const rows = [row("bare Node")];
const { openDatabase } = await import(new URL("db/client.js", dist).href);
rows.push(row("+ database module"));
const dir = mkdtempSync(join(tmpdir(), "portico-memory-"));
const handle = await openDatabase({ dataDir: join(dir, "data") });
await handle.db.preset.findMany({ take: 1 });
rows.push(row("+ Prisma connected, one query (SQLite)"));
await import(new URL("core/core.js", dist).href);
rows.push(row("+ core modules"));
await import(new URL("gateway/app.js", dist).href);
rows.push(row("+ gateway modules"));
await handle.close();
rmSync(dir, { recursive: true, force: true });
const primary = execFileSync(process.execPath, [...process.execArgv, new URL(import.meta.url).pathname, "--primary"], { encoding: "utf8" }).trim();

console.log(`Node ${process.version}, flags ${process.execArgv.join(" ")}; MB after a full GC at each step.\n`);
console.log("| step | RSS | RssAnon | heap used | heap committed |");
console.log("|---|---:|---:|---:|---:|");
for (const r of rows) console.log(r);
console.log(primary);
