// Runs the Prisma CLI the way stack notes §3 requires: node_modules/prisma/build/index.js with
// --config prisma.<db>.config.ts and DATABASE_URL (read by that config) in the environment.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { DbProvider } from "../../src/db/client.js";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const prismaCli = fileURLToPath(new URL("../../node_modules/prisma/build/index.js", import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function configFor(provider: DbProvider): string {
  return provider === "postgresql" ? "prisma.postgres.config.ts" : "prisma.sqlite.config.ts";
}

export function schemaDirFor(provider: DbProvider): string {
  return provider === "postgresql" ? "prisma/postgres" : "prisma/sqlite";
}

export function runPrisma(provider: DbProvider, args: string[], env: Record<string, string>): Promise<CliResult> {
  return runNode([prismaCli, ...args, "--config", configFor(provider)], env);
}

export function runNode(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: repoRoot,
      env: { ...process.env, NO_COLOR: "1", PRISMA_HIDE_UPDATE_MESSAGE: "1", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}
