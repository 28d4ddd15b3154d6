/**
 * The PORTICO_HOST_* variables: one definition read by `portico intern-host` (through
 * src/host/options.ts, which adds the agent profile file) and by `portico serve`'s configuration for its
 * embedded host (src/config.ts). Errors name the variable.
 */
import { optionalCount, settingsMessage, textSetting, z } from "./settings.js";

/** Limit variables → the host limit (InternHostLimits field) each sets. Integers; unset keeps the default. */
export const HOST_LIMIT_VARIABLES = {
  PORTICO_HOST_MAX_CONCURRENT_RUNS: "maxConcurrentRuns",
  PORTICO_HOST_MAX_PAUSED_RUNS: "maxPausedRuns",
  PORTICO_HOST_MAX_QUEUED_BYTES_PER_RUN: "maxQueuedBytesPerRun",
  PORTICO_HOST_MAX_RUN_DURATION_MS: "maxRunDurationMs",
  PORTICO_HOST_AGENT_START_BUDGET_MS: "agentStartBudgetMs",
  PORTICO_HOST_MAX_ACP_LINE_BYTES: "maxAcpLineBytes",
  PORTICO_HOST_MAX_OPEN_TERMINALS: "maxOpenTerminalsPerSession",
  PORTICO_HOST_MAX_TERMINAL_OUTPUT_BYTES: "maxTerminalOutputBytes",
  PORTICO_HOST_IDLE_AGENT_TTL_MS: "idleAgentTtlMs",
  PORTICO_HOST_MAX_AGENTS: "maxAgents",
  PORTICO_HOST_SESSION_RECORD_TTL_MS: "sessionRecordTtlMs",
  PORTICO_HOST_INTERACTION_DEADLINE_MS: "defaultInteractionDeadlineMs",
  PORTICO_HOST_HELD_RUN_GRACE_MS: "heldRunGraceMs",
  PORTICO_HOST_CANCEL_GRACE_MS: "cancelGraceMs",
  PORTICO_HOST_RECONNECT_INITIAL_MS: "reconnectInitialMs",
  PORTICO_HOST_RECONNECT_MAX_MS: "reconnectMaxMs",
  PORTICO_HOST_PING_INTERVAL_MS: "pingIntervalMs",
  PORTICO_HOST_LIVENESS_TIMEOUT_MS: "livenessTimeoutMs",
} as const;

export type HostLimitName = (typeof HOST_LIMIT_VARIABLES)[keyof typeof HOST_LIMIT_VARIABLES];

/** The PORTICO_HOST_* variables as read, before any default is applied. */
export interface HostSettings {
  /** The limits that were set. */
  limits: Partial<Record<HostLimitName, number>>;
  /** PORTICO_HOST_CORE_URL. */
  coreUrl?: string;
  /** PORTICO_HOST_TOKEN (never logged). */
  token?: string;
  /** PORTICO_HOST_WORK_ROOT. */
  workRoot?: string;
  /** PORTICO_HOST_PROFILE: path of an agent profile JSON file. */
  profileFile?: string;
  /** PORTICO_HOST_BWRAP: a bwrap path, or null for "off" (no bubblewrap). */
  bwrapPath?: string | null;
  /** PORTICO_HOST_RUN_AS: "uid:gid", or null for "off" (a root host keeps root). */
  runAs?: { uid: number; gid: number } | null;
}

const HostEnv = z.looseObject({
  ...(Object.fromEntries(Object.keys(HOST_LIMIT_VARIABLES).map((name) => [name, optionalCount()])) as Record<string, ReturnType<typeof optionalCount>>),
  PORTICO_HOST_CORE_URL: textSetting(),
  PORTICO_HOST_TOKEN: textSetting(),
  PORTICO_HOST_WORK_ROOT: textSetting(),
  PORTICO_HOST_PROFILE: textSetting(),
  PORTICO_HOST_BWRAP: textSetting(),
  PORTICO_HOST_RUN_AS: textSetting({ pattern: /^(\d+:\d+|off)$/, problem: "must be uid:gid or off" }),
});

/** Reads the PORTICO_HOST_* variables; throws an Error naming the variable on a malformed value. */
export function parseHostSettings(env: NodeJS.ProcessEnv): HostSettings {
  const parsed = HostEnv.safeParse(env);
  if (!parsed.success) throw new Error(settingsMessage(parsed.error));
  const e = parsed.data as Record<string, unknown> & z.output<typeof HostEnv>;
  const limits: Partial<Record<HostLimitName, number>> = {};
  for (const [name, key] of Object.entries(HOST_LIMIT_VARIABLES)) {
    const n = e[name];
    if (typeof n === "number") limits[key] = n;
  }
  const out: HostSettings = { limits };
  if (e.PORTICO_HOST_CORE_URL) out.coreUrl = e.PORTICO_HOST_CORE_URL;
  if (e.PORTICO_HOST_TOKEN) out.token = e.PORTICO_HOST_TOKEN;
  if (e.PORTICO_HOST_WORK_ROOT) out.workRoot = e.PORTICO_HOST_WORK_ROOT;
  if (e.PORTICO_HOST_PROFILE) out.profileFile = e.PORTICO_HOST_PROFILE;
  if (e.PORTICO_HOST_BWRAP) out.bwrapPath = e.PORTICO_HOST_BWRAP === "off" ? null : e.PORTICO_HOST_BWRAP;
  if (e.PORTICO_HOST_RUN_AS) {
    const [uid, gid] = e.PORTICO_HOST_RUN_AS.split(":");
    out.runAs = e.PORTICO_HOST_RUN_AS === "off" ? null : { uid: Number(uid), gid: Number(gid) };
  }
  return out;
}
