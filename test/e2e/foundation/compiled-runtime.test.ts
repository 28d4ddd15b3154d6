/**
 * Production processes run compiled JavaScript: `portico serve` and the built-in agent it spawns load
 * dist/, with no TypeScript loader and no esbuild service anywhere in the process tree, and tsx is not
 * a runtime dependency.
 */
import { readFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { ChildProcess } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { runPortico, startPortico } from "../../helpers/cli.js";
import { processTree } from "../../helpers/procs.js";

const root = resolve(import.meta.dirname, "../../..");

describe("compiled runtime", () => {
  const dirs: string[] = [];
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once("exit", r));
      child.kill("SIGTERM");
      await gone;
    }
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it("tsx is a development dependency only", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    expect(pkg.dependencies.tsx).toBeUndefined();
    expect(readFileSync(join(root, "bin", "portico.mjs"), "utf8")).not.toMatch(/tsx/);
  });

  it("serve and the built-in agent run from dist/ with no TypeScript loader in the tree", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "portico-compiled-"));
    dirs.push(dataDir);
    const env = { PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_DATA_DIR: dataDir, PORTICO_LOG_LEVEL: "info" };
    const boot = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], env, 120_000)).stdout);
    const started = await startPortico(["serve"], env, (out) =>
      /"msg":"serving/.test(out) ? /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1] : undefined,
    );
    child = started.child;
    // A run makes the embedded host spawn the built-in agent; keep the stream open until the agent answered.
    const res = await fetch(`${started.value}/interns/${boot.intern_id}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${boot.api_key}`, "content-type": "application/json" },
      body: JSON.stringify({ stream: true, messages: [{ role: "user", content: "$ echo compiled" }] }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain("compiled\\n");

    const tree = processTree(child.pid!);
    const agent = tree.find((p) => p.cmdline.includes("builtin-main"));
    expect(agent?.cmdline).toContain(join("dist", "agent", "builtin-main.js"));
    for (const p of tree) {
      expect(p.comm).not.toMatch(/esbuild/);
      expect(p.cmdline).not.toMatch(/tsx|\.ts\b|run-ts/);
    }
  }, 180_000);
});
