/** Shared helpers of the host integration tests. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInternHost, type InternHost } from "../../../src/host/link.js";
import type { AgentProfile, InternHostLimits } from "../../../src/host/options.js";
import type { AgentLauncher } from "../../../src/host/agent-process.js";
import type { Logger } from "pino";
import { FakeCore } from "./fake-core.js";
import { waitFor } from "../../helpers/wait.js";

export const REPO_ROOT = resolve(fileURLToPath(new URL("../../..", import.meta.url)));

export interface Harness {
  core: FakeCore;
  host: InternHost;
  workRoot: string;
  dispose(): Promise<void>;
}

/** Starts a fake core and a host attached to it. */
export async function startHarness(opts: {
  profile?: Partial<AgentProfile>;
  launcher?: AgentLauncher;
  limits?: Partial<InternHostLimits>;
  core?: ConstructorParameters<typeof FakeCore>[0];
  bwrapPath?: string | null;
  logger?: Logger;
}): Promise<Harness> {
  const core = await new FakeCore({ pingIntervalMs: 300, livenessTimeoutMs: 1500, ...opts.core }).listen();
  const workRoot = mkdtempSync(join(tmpdir(), "portico-host-"));
  const host = createInternHost({
    coreUrl: core.url,
    token: opts.core?.token ?? "pht-test",
    profile: { command: "false", ...opts.profile },
    workRoot,
    ...(opts.launcher ? { launcher: opts.launcher } : {}),
    limits: { reconnectInitialMs: 50, reconnectMaxMs: 300, ...opts.limits },
    ...(opts.bwrapPath !== undefined ? { bwrapPath: opts.bwrapPath } : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
  });
  await host.ready;
  return {
    core,
    host,
    workRoot,
    async dispose() {
      await host.close();
      await core.close();
      rmSync(workRoot, { recursive: true, force: true });
    },
  };
}

/** True while a process group exists. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** `waitFor` (test/helpers/wait.ts) with this folder's argument order. */
export async function waitUntil(pred: () => boolean, timeoutMs = 5000, what = "condition"): Promise<void> {
  await waitFor(what, pred, { timeoutMs });
}
