/**
 * The embedded host of `portico serve`: the built-in agent as a subprocess, attached to the
 * bootstrap intern, with working folders under the data folder.
 */
import { chmodSync, mkdirSync, statSync } from "node:fs";
import { ensureDir } from "../lib/dirs.js";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Transport } from "@connectrpc/connect";
import type { Logger } from "pino";
import { createInternHost, type InternHost } from "./link.js";
import type { AgentProfile, InternHostLimits } from "./options.js";

/** Repository root (this file lives in src/host). */
const REPO_ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));

/** The profile of the built-in agent: its compiled entry (dist/agent/builtin-main.js) as a plain Node subprocess. */
export function builtinAgentProfile(): AgentProfile {
  return {
    name: "portico-builtin",
    command: process.execPath,
    args: [join(REPO_ROOT, "dist", "agent", "builtin-main.js")],
    inheritEnv: "minimal",
    cwd: "session",
    offerTerminal: true,
    offerFs: false,
    sandbox: "terminal",
  };
}

export interface EmbeddedHostOptions {
  /** Core URL (HTTP/2); or pass `transport`. */
  coreUrl?: string;
  transport?: Transport;
  /** The built-in intern's host token. */
  token: string;
  /** Portico's data folder; sessions live in `<dataDir>/interns/<internId>/sessions/<sessionId>`. */
  dataDir: string;
  internId: string;
  logger?: Logger;
  limits?: Partial<InternHostLimits>;
  /** Override the run-as user when started as root (default 65534:65534; null keeps root). */
  runAs?: { uid: number; gid: number } | null;
  /** bwrap path override (null disables). */
  bwrapPath?: string | null;
  /** The core's own certificate (PEM) when it serves TLS: the embedded host pins it. */
  coreCert?: string | Buffer;
}

/** Starts the embedded intern host for `portico serve` (or `npm start`). */
export function startEmbeddedHost(opts: EmbeddedHostOptions): InternHost {
  const workRoot = join(opts.dataDir, "interns", opts.internId);
  ensureDir(workRoot, { mode: 0o750, setting: "PORTICO_DATA_DIR" });
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  if (isRoot && opts.runAs !== null) {
    // The unprivileged agent user must be able to traverse down to its working folder
    // (search permission only; listing stays closed).
    for (const dir of [opts.dataDir, join(opts.dataDir, "interns"), workRoot]) {
      const mode = statSync(dir).mode & 0o7777;
      if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o011);
    }
  }
  return createInternHost({
    ...(opts.coreUrl !== undefined ? { coreUrl: opts.coreUrl } : {}),
    ...(opts.transport !== undefined ? { transport: opts.transport } : {}),
    token: opts.token,
    ...(opts.coreCert ? { tls: { pinnedCert: opts.coreCert } } : {}),
    profile: builtinAgentProfile(),
    workRoot,
    ...(opts.limits ? { limits: opts.limits } : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
    ...(opts.runAs !== undefined ? { runAs: opts.runAs } : {}),
    ...(opts.bwrapPath !== undefined ? { bwrapPath: opts.bwrapPath } : {}),
  });
}
