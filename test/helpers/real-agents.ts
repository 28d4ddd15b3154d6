/**
 * The real ACP agents the interns end-to-end tests drive (gemini-cli, Zed's Claude adapters, codex-acp,
 * opencode), pinned in test/agents/package.json and installed there from the npm registry the first time a
 * test asks for them (`npm run agents:install` does the same by hand; npm install, not ci: npm's
 * lock file cannot hold opencode's binaries for other platforms). They are not dependencies of
 * Portico: only these tests run them, each offline against Portico with fake model upstreams behind it.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { waitFor } from "./wait.js";

const AGENTS_DIR = resolve(import.meta.dirname, "..", "agents");
const BIN = join(AGENTS_DIR, "node_modules", ".bin");

/** Executable of each pinned agent, by the name its package installs. */
export const REAL_AGENT_BINS = {
  gemini: join(BIN, "gemini"),
  claudeCodeAcp: join(BIN, "claude-code-acp"),
  claudeAgentAcp: join(BIN, "claude-agent-acp"),
  codexAcp: join(BIN, "codex-acp"),
  opencode: join(BIN, "opencode"),
} as const;

function installed(): boolean {
  return Object.values(REAL_AGENT_BINS).every((p) => existsSync(p));
}

/**
 * Installs the pinned agents into test/agents unless they are there (about 900 MB, under a minute from
 * the registry). Test files run in parallel workers: a lock directory makes one of them install while
 * the others wait for it.
 */
export async function ensureRealAgents(): Promise<typeof REAL_AGENT_BINS> {
  if (installed()) return REAL_AGENT_BINS;
  const lock = join(AGENTS_DIR, ".installing");
  let owner = false;
  try {
    mkdirSync(lock);
    owner = true;
  } catch {
    // Another worker installs; wait for it below.
  }
  if (owner) {
    try {
      execFileSync("npm", ["run", "-s", "agents:install"], {
        cwd: resolve(AGENTS_DIR, "..", ".."),
        stdio: ["ignore", "ignore", "pipe"],
        timeout: 600_000,
      });
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
    if (!installed()) throw new Error(`npm run agents:install did not install every agent in test/agents/package.json`);
    return REAL_AGENT_BINS;
  }
  await waitFor("another test worker to install the real agents in test/agents", () => !existsSync(lock) && installed(), {
    timeoutMs: 600_000,
    intervalMs: 500,
  });
  return REAL_AGENT_BINS;
}

