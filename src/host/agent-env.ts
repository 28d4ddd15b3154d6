/**
 * The agent's environment: working folders (per session, per intern or fixed), the shared HOME,
 * their ownership and reachability for an unprivileged run-as user, and the variables an agent or
 * its commands inherit (never Portico's own settings or credentials).
 */
import { chmodSync, chownSync, mkdirSync, statSync } from "node:fs";
import { createHash } from "node:crypto";
import { dirname, join, resolve } from "node:path";
import type { AgentProfile } from "./options.js";

const MINIMAL_ENV = ["PATH", "LANG", "LANGUAGE", "TZ", "TERM", "NODE_OPTIONS", "SHELL", "USER", "LOGNAME"];

/** Portico's own connection settings (with credentials) never reach an agent, whatever the profile inherits. */
const PORTICO_SECRET_ENV = new Set(["DATABASE_URL", "SHADOW_DATABASE_URL", "REDIS_URL"]);

/** A filesystem-safe folder name for a caller-visible session id. */
export function sessionFolderName(sessionId: string): string {
  if (/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$/.test(sessionId)) return sessionId;
  return `h-${createHash("sha256").update(sessionId).digest("hex").slice(0, 32)}`;
}

/** Variables an agent (or a command it runs) gets: inherited per profile, then HOME/PWD and the profile's own. */
export function agentEnvironment(profile: AgentProfile, homeDir: string, cwd: string, source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  const inherit = profile.inheritEnv ?? "all";
  for (const [k, v] of Object.entries(source)) {
    if (v === undefined || k.startsWith("PORTICO_") || PORTICO_SECRET_ENV.has(k)) continue;
    if (inherit === "minimal" && !MINIMAL_ENV.includes(k) && !k.startsWith("LC_")) continue;
    env[k] = v;
  }
  env.HOME = homeDir;
  env.PWD = cwd;
  for (const [k, v] of Object.entries(profile.env ?? {})) env[k] = v;
  return env;
}

export interface AgentFolders {
  homeDir: string;
  cwdFor(sessionId: string): string;
  /** Creates a folder (owned by the run-as user when there is one). */
  ensureDir(dir: string): void;
  /** Throws when the run-as user cannot traverse down to `dir`. */
  checkReachable(dir: string): void;
}

export function agentFolders(opts: { profile: AgentProfile; workRoot: string; runAs: { uid: number; gid: number } | undefined }): AgentFolders {
  const homeDir = join(opts.workRoot, "home");
  return {
    homeDir,
    cwdFor(key) {
      const strategy = opts.profile.cwd ?? "session";
      if (strategy === "session") return join(opts.workRoot, "sessions", sessionFolderName(key));
      if (strategy === "intern") return join(opts.workRoot, "workspace");
      return strategy.fixed;
    },
    ensureDir(dir) {
      mkdirSync(dir, { recursive: true, mode: 0o750 });
      if (!opts.runAs) return;
      chownSync(dir, opts.runAs.uid, opts.runAs.gid);
      // Parents must be traversable by the unprivileged user.
      const root = resolve(opts.workRoot);
      for (let p = dirname(dir); p.startsWith(root) && p.length >= root.length; p = dirname(p)) {
        try {
          chmodSync(p, 0o755);
        } catch {
          // best effort
        }
        if (p === root) break;
      }
    },
    checkReachable(dir) {
      if (!opts.runAs) return;
      const { uid, gid } = opts.runAs;
      for (let p = dirname(dir); ; p = dirname(p)) {
        const st = statSync(p);
        const ok = st.uid === uid ? (st.mode & 0o100) !== 0 : st.gid === gid ? (st.mode & 0o010) !== 0 : (st.mode & 0o001) !== 0;
        if (!ok) {
          throw new Error(`the working folder is not reachable by uid ${uid}: make ${p} traversable (chmod o+x) or choose another work root`);
        }
        if (p === dirname(p)) break;
      }
    },
  };
}
