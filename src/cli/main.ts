/**
 * The `portico` command line: serve, core, gateway, migrate, intern-host and admin tasks.
 */
import { readFileSync } from "node:fs";
import { Command, Option } from "commander";
import { loadConfig, ConfigError, type Config } from "../config.js";
import { createLogger, type Logger } from "../log.js";
import { createLogSink, type LogSink } from "../lib/log-sink.js";
import { installShutdown } from "./shutdown.js";
import type { RunningProcess } from "../server.js";
import cluster from "node:cluster";
import { availableParallelism } from "node:os";
import { capHeapGrowth, operatorNamesFlag, SERVE_SEMI_SPACE_MB } from "./heap-growth.js";
import { capYoungGeneration } from "./young-generation.js";
import { isServeWorker, reportReady } from "../cluster/ipc.js";
import { startServePrimary } from "../cluster/primary.js";
import { printServingBanner } from "./banner.js";

// Files Portico creates (database, master key, working folders) are private to its user by default.
process.umask(0o077);

/** The version in package.json (read at run time, so it cannot drift from the release). */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  return pkg.version;
}

function config(): Config {
  try {
    return loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`portico: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

/** The logger of a long-running command: lines go through a sink that never blocks the process. */
function serverLogger(cfg: Config): { logger: Logger; sink: LogSink } {
  const sink = createLogSink(process.stdout);
  return { logger: createLogger({ level: cfg.logLevel, destination: sink }), sink };
}

/** Keeps a process running until SIGTERM/SIGINT, then stops it within the configured bound. */
function holdUntilSignal(proc: RunningProcess, cfg: Config, logger: Logger, sink: LogSink): void {
  installShutdown({ logger, sink, graceMs: cfg.shutdownTimeoutMs, close: () => proc.close() });
}

/**
 * V8's young generation may grow to 2 × 16 MB per process and stays reserved while idle; `serve` workers
 * cap it at 2 × 4 MB (no measurable throughput change in bench/key-lookup.ts, ~30 MB less resident
 * memory each) unless the operator chose a size (node flags or NODE_OPTIONS). A single process keeps it at
 * the same size at run time (src/cli/young-generation.ts).
 */
function workerExecArgv(): string[] {
  const flag = "--max-semi-space-size";
  return operatorNamesFlag(flag) ? process.execArgv : [...process.execArgv, `${flag}=${SERVE_SEMI_SPACE_MB}`];
}

const program = new Command();
program
  .name("portico")
  .description("Portico: presets, intern runs and BYOK credentials behind one API")
  .version(packageVersion(), "-V, --version", "print the version of Portico")
  .showHelpAfterError();

program
  .command("serve")
  .description(
    "run core and gateway (and the embedded intern host): a primary process forks one worker process per CPU, " +
      "each serving both on the shared ports (PORTICO_WORKERS sets how many; 1 serves from a single process)",
  )
  .action(async () => {
    const cfg = config();
    capHeapGrowth();
    capYoungGeneration();
    const workers = cfg.workers === 0 ? availableParallelism() : cfg.workers;
    if (cluster.isPrimary && workers > 1) {
      // The primary forks the workers and holds what they share; it serves nothing itself.
      const { logger, sink } = serverLogger(cfg);
      let fatal: string | undefined;
      const stopAll = installShutdown({
        logger,
        sink,
        // The workers each stop within the bound; the primary waits for them a little longer.
        graceMs: cfg.shutdownTimeoutMs + 1_000,
        close: async () => {
          await primary.stop();
          if (fatal) throw new Error(fatal);
        },
        // A second signal to the primary is a second signal to every worker: each exits at once and takes
        // its agent processes along, without waiting to notice that the primary is gone.
        onForceExit: () => {
          for (const w of primary.workers().values()) if (!w.isDead()) w.process.kill("SIGTERM");
        },
      });
      const primary = startServePrimary({
        workers,
        execArgv: workerExecArgv(),
        instanceId: cfg.instanceId,
        logger,
        onFatal: (reason) => {
          fatal = reason;
          stopAll(reason);
        },
      });
      const urls = await primary.ready;
      logger.info({ workers }, "serving with worker processes");
      printServingBanner(urls);
      return;
    }
    const worker = isServeWorker();
    const base = serverLogger(cfg);
    const logger = worker ? base.logger.child({ worker: cfg.workerIndex }) : base.logger;
    const [{ startServe }, { firstRunBootstrap }, { attachEmbeddedHost, waitForEmbeddedHost }] = await Promise.all([
      import("../server.js"),
      import("./first-run.js"),
      import("./embedded-host.js"),
    ]);
    const proc = await startServe(cfg, logger);
    // Signals are handled from here on, before the embedded host spawns agent processes: a signal during
    // the rest of start-up must take them along too, not kill this process with Node's default handler.
    const stop = installShutdown({ logger, sink: base.sink, graceMs: cfg.shutdownTimeoutMs, close: () => proc.close() });
    // Without its primary a worker has no one to coordinate with: stop.
    if (worker) process.on("disconnect", () => stop("primary gone"));
    await firstRunBootstrap(proc, cfg, logger);
    // One embedded intern host per serve: in worker 0 when there are several.
    if (!worker || cfg.workerIndex === 0) await attachEmbeddedHost(proc, cfg, logger);
    await waitForEmbeddedHost(proc, cfg, logger);
    proc.startupComplete = true;
    // One process: say so here; with workers, the primary says it once every worker is ready.
    const urls = proc.gatewayUrl && proc.coreServer ? { gateway: proc.gatewayUrl, core: proc.coreServer.url } : undefined;
    if (worker) reportReady(urls);
    else {
      logger.info("serving");
      printServingBanner(urls);
    }
  });

program
  .command("core")
  .description("run the core alone (Connect, gRPC and gRPC-Web on PORTICO_GRPC_PORT)")
  .action(async () => {
    const cfg = config();
    const { logger, sink } = serverLogger(cfg);
    const [{ startCoreProcess, startMetricsListener }, { createMetrics }] = await Promise.all([import("../server.js"), import("../lib/metrics.js")]);
    const metrics = createMetrics();
    const proc = await startCoreProcess(cfg, logger, metrics);
    if (cfg.metricsPort !== undefined) {
      const listener = await startMetricsListener(cfg, logger, metrics, cfg.metricsPort).catch(async (err: unknown) => {
        await proc.close();
        throw err;
      });
      proc.onClose.push(() => listener.close());
    }
    proc.startupComplete = true;
    holdUntilSignal(proc, cfg, logger, sink);
  });

program
  .command("gateway")
  .description("run the public HTTP gateway alone, dialing a core over gRPC")
  .addOption(new Option("--core <url>", "core URL, or several separated by commas (failover in order)").env("PORTICO_CORE_URL"))
  .action(async (opts: { core?: string }) => {
    const cfg = config();
    const { logger, sink } = serverLogger(cfg);
    const { startSplitGateway } = await import("../server.js");
    const proc = await startSplitGateway(cfg, logger, opts.core ?? cfg.coreUrl);
    proc.startupComplete = true;
    holdUntilSignal(proc, cfg, logger, sink);
  });

program
  .command("migrate")
  .description("apply pending database migrations and exit")
  .action(async () => {
    const cfg = config();
    const { withDatabase } = await import("./shared.js");
    await withDatabase(cfg, async (handle) => {
      process.stdout.write(`migrations applied (${handle.provider})\n`);
    });
  });

program
  .command("intern-host")
  .description("run an intern host beside an ACP agent: PORTICO_HOST_TOKEN=… portico intern-host --core <url> -- <agent command…>")
  .option("--core <url>", "core URL, https for TLS, or several separated by commas: the host fails over in order (PORTICO_HOST_CORE_URL)")
  .option("--token-file <file>", "file holding the intern's host token (PORTICO_HOST_TOKEN_FILE; or set PORTICO_HOST_TOKEN)")
  .option("--core-ca <file>", "CA bundle (PEM) that verifies an https core (PORTICO_HOST_CA_FILE; default: system CAs)")
  .option("--token <token>", "deprecated: visible in the process list; use PORTICO_HOST_TOKEN or --token-file")
  .option("--profile <file>", "agent profile JSON (PORTICO_HOST_PROFILE)")
  .option("--work-root <dir>", "root of per-session working folders (PORTICO_HOST_WORK_ROOT)")
  .argument("[agent...]", "agent command and arguments, after --")
  .action(async (agent: string[], opts: { core?: string; token?: string; tokenFile?: string; coreCa?: string; profile?: string; workRoot?: string }) => {
    const cfg = config();
    const { logger, sink } = serverLogger(cfg);
    const stopper = new AbortController();
    let running: Promise<number> | undefined;
    installShutdown({
      logger,
      sink,
      graceMs: cfg.shutdownTimeoutMs,
      close: async () => {
        stopper.abort();
        const code = await running;
        if (code) throw new Error(`intern host stopped with status ${code}`);
      },
    });
    const { runInternHostCommand } = await import("../host/cli.js");
    running = runInternHostCommand({
      signal: stopper.signal,
      ...(opts.core ? { core: opts.core } : {}),
      ...(opts.token ? { token: opts.token } : {}),
      ...(opts.tokenFile ? { tokenFile: opts.tokenFile } : {}),
      ...(opts.coreCa ? { coreCa: opts.coreCa } : {}),
      ...(opts.profile ? { profile: opts.profile } : {}),
      ...(opts.workRoot ? { workRoot: opts.workRoot } : {}),
      agent,
      logger,
    });
    const code = await running;
    if (!stopper.signal.aborted) process.exit(code);
  });

// Modules load with the command that needs them: a serve primary (which forks the workers) never loads
// the database, the core or the gateway, and `portico serve` never loads the operator commands.
if (process.argv[2] !== "serve") (await import("./admin.js")).registerAdminCommands(program, config);

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`portico: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
