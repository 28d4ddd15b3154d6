/**
 * `portico intern-host --core <url>[,<url>…] [--token-file f] [--core-ca ca.pem] [--profile file.json] [--work-root dir] -- <agent command…>`
 * The token comes from PORTICO_HOST_TOKEN or a file (argv would show it in `ps`); `--token` still
 * works with a warning. The lead's CLI parses argv and calls runInternHostCommand.
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import type { Logger } from "pino";
import { createInternHost, type InternHost } from "./link.js";
import { internHostOptionsFromEnv, loadAgentProfile, type AgentProfile } from "./options.js";

export interface InternHostCommandOptions {
  /** Core URL, e.g. http://core:50051, or several comma-separated for failover (falls back to PORTICO_HOST_CORE_URL). */
  core?: string;
  /** Host token given on the command line (deprecated: visible in `ps`; a warning is logged). Never logged. */
  token?: string;
  /** File holding the host token (falls back to PORTICO_HOST_TOKEN_FILE, then PORTICO_HOST_TOKEN). */
  tokenFile?: string;
  /** CA bundle (PEM) that verifies an https core (falls back to PORTICO_HOST_CA_FILE; default: system CAs). */
  coreCa?: string;
  /** Agent profile JSON file (falls back to PORTICO_HOST_PROFILE). */
  profile?: string;
  /** Agent command and arguments after `--`; override the profile's command/args. */
  agent?: string[];
  /** Root of working folders (falls back to PORTICO_HOST_WORK_ROOT, then ~/.portico/intern-host, or /var/lib/portico/intern-host as root). */
  workRoot?: string;
  logger?: Logger;
  /** Environment to read PORTICO_HOST_* from; default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Stops the host when aborted; by default SIGINT/SIGTERM stop it. */
  signal?: AbortSignal;
  /** Called once the host object exists (tests). */
  onStarted?: (host: InternHost) => void;
}

/**
 * Runs an intern host until SIGINT/SIGTERM (or `signal`), then stops every agent. Resolves with the
 * process exit code; throws on invalid options before connecting.
 */
export async function runInternHostCommand(opts: InternHostCommandOptions): Promise<number> {
  const env = opts.env ?? process.env;
  const fromEnv = internHostOptionsFromEnv(env);
  const core = opts.core ?? fromEnv.coreUrl;
  if (!core) throw new Error("intern-host: --core <url> is required");
  const token = resolveToken(opts, env);
  const caFile = opts.coreCa ?? env.PORTICO_HOST_CA_FILE;
  const ca = caFile ? readFileSync(resolve(caFile), "utf8") : undefined;
  let profile: AgentProfile | undefined = opts.profile ? loadAgentProfile(resolve(opts.profile)) : fromEnv.profile;
  const agent = opts.agent ?? [];
  if (agent.length > 0) {
    const [command, ...args] = agent as [string, ...string[]];
    profile = { ...(profile ?? {}), command, args };
  }
  if (!profile) throw new Error("intern-host: give the agent command after `--` or a --profile file");
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  // As root, agents run unprivileged and must reach their folders: /root is not traversable.
  const defaultRoot = isRoot ? "/var/lib/portico/intern-host" : join(homedir(), ".portico", "intern-host");
  const workRoot = resolve(opts.workRoot ?? fromEnv.workRoot ?? defaultRoot);
  const host = createInternHost({
    coreUrl: core,
    token,
    ...(ca ? { tls: { ca } } : {}),
    profile,
    workRoot,
    limits: fromEnv.limits,
    ...(opts.logger ? { logger: opts.logger } : {}),
    ...(fromEnv.runAs !== undefined ? { runAs: fromEnv.runAs } : {}),
    ...(fromEnv.bwrapPath !== undefined ? { bwrapPath: fromEnv.bwrapPath } : {}),
  });
  opts.onStarted?.(host);
  opts.logger?.info({ core, workRoot, agent: profile.name ?? profile.command }, "intern host started");
  await new Promise<void>((resolveStop) => {
    if (opts.signal) {
      if (opts.signal.aborted) return resolveStop();
      opts.signal.addEventListener("abort", () => resolveStop(), { once: true });
    } else {
      process.once("SIGINT", () => resolveStop());
      process.once("SIGTERM", () => resolveStop());
    }
  });
  await host.close();
  return 0;
}

/** The host token: --token-file / PORTICO_HOST_TOKEN_FILE, PORTICO_HOST_TOKEN, or (deprecated) --token. */
function resolveToken(opts: InternHostCommandOptions, env: NodeJS.ProcessEnv): string {
  const file = opts.tokenFile ?? env.PORTICO_HOST_TOKEN_FILE;
  if (file) {
    let text: string;
    try {
      text = readFileSync(resolve(file), "utf8");
    } catch (err) {
      throw new Error(`intern-host: cannot read the token file ${file}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
    }
    const token = text.trim();
    if (!token) throw new Error(`intern-host: the token file ${file} is empty`);
    return token;
  }
  if (opts.token) {
    opts.logger?.warn("--token puts the host token in the process list; use PORTICO_HOST_TOKEN or --token-file instead");
    return opts.token;
  }
  if (env.PORTICO_HOST_TOKEN) return env.PORTICO_HOST_TOKEN;
  throw new Error("intern-host: the host token is required: PORTICO_HOST_TOKEN, or --token-file <file> (PORTICO_HOST_TOKEN_FILE)");
}
