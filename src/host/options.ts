/**
 * Options of the intern host: limits with documented defaults, the agent profile, and the mapping
 * from PORTICO_HOST_* environment variables (for the lead's composition root).
 */
import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import type { Transport } from "@connectrpc/connect";
import type { AgentLauncher } from "./agent-process.js";
import type { HostTlsOptions } from "./tls.js";
import { HOST_LIMIT_VARIABLES, parseHostSettings } from "../lib/host-settings.js";
import { settingsMessage, z } from "../lib/settings.js";
import { MODEL_GATEWAY_FAMILIES, type ModelGatewayFamily } from "./agent-env.js";

/** How the host confines shell commands and the agent process. */
export type SandboxStrategy = "terminal" | "process" | "none";

/** Where an agent session's working folder lives. */
export type CwdStrategy = "session" | "intern" | { fixed: string };

/**
 * An agent profile says how to start and drive one kind of ACP agent.
 * The host starts one agent process per session from it.
 */
export interface AgentProfile {
  /** Executable to start (looked up on PATH). */
  command: string;
  /** Arguments. Default []. */
  args?: string[];
  /** Extra environment variables for the agent (values never logged). Default {}. */
  env?: Record<string, string>;
  /**
   * Which variables of the host's own environment the agent inherits: "all" (minus PORTICO_* and
   * the host token) or "minimal" (PATH, LANG, LC_*, TZ, TERM, NODE_OPTIONS). Default "all".
   */
  inheritEnv?: "all" | "minimal";
  /**
   * Working folder of a session: "session" (a folder per session under the sessions root, default),
   * "intern" (one shared folder per intern), or {fixed: "/abs/path"}.
   */
  cwd?: CwdStrategy;
  /**
   * Optional ACP session mode ids set with session/set_mode at the start of a run of each approval
   * mode (e.g. codex "full-access"/"read-only", claude "bypassPermissions"/"default"). Only applied
   * when the agent advertises the mode. Default: none (the agent's own mode is left alone).
   */
  modes?: { selfDrive?: string; manual?: string };
  /** Advertise client terminals (terminal/*), so the host runs and sandboxes commands. Default true. */
  offerTerminal?: boolean;
  /** Advertise client fs (fs/read_text_file, fs/write_text_file). Default true. */
  offerFs?: boolean;
  /**
   * "terminal" (default): in manual mode, commands the agent runs through client terminals run under
   * bubblewrap until an allow answer escalates them. "process": the same, and the whole agent
   * process also runs under bubblewrap (network kept, only its working folder, HOME and a private
   * /tmp writable) — for agents that run commands themselves. "none": no sandbox at all (opt-out).
   */
  sandbox?: SandboxStrategy;
  /** Display name used before the agent reports its own (Hello.agent_name). */
  name?: string;
  /**
   * ACP auth method id the host passes to `authenticate` after initialize and before the first
   * session/new (e.g. codex-acp "openai-api-key" with OPENAI_API_KEY in env). Default: none.
   */
  authMethod?: string;
  /**
   * When a run carries a model gateway (its model calls go through Portico), how this agent is pointed
   * at it when it does not take the ACP `gateway` auth method: "anthropic" (claude-code-acp,
   * claude-agent-acp), "openai-responses" (codex-acp), "openai-chat" (OpenAI-compatible agents),
   * "gemini" (gemini-cli) or "opencode". See agent-env.ts modelGatewayLaunch. Default: none (the
   * ACP gateway auth method when the agent offers it; `${PORTICO_MODEL_*}` placeholders otherwise).
   */
  modelGateway?: ModelGatewayFamily;
}

/** Limits of one host. Every field has a default in {@link defaultInternHostLimits}. */
export interface InternHostLimits {
  /** Runs held at once (streaming or paused). Beyond → RunRejected "busy". */
  maxConcurrentRuns: number;
  /** Runs held paused across a question at once. A new run is refused ("busy") while this many are paused. */
  maxPausedRuns: number;
  /** Bytes of events a run may have queued and not yet written to the link. Beyond → TurnFailed attachment_failed (410). */
  maxQueuedBytesPerRun: number;
  /** Longest a run may last, in ms; then it is cancelled (RunEnded deadline). */
  maxRunDurationMs: number;
  /** Time allowed to spawn an agent and finish initialize + session/new, in ms. Beyond → RunRejected "timeout". */
  agentStartBudgetMs: number;
  /** Largest ACP line accepted from the agent, in bytes. */
  maxAcpLineBytes: number;
  /** Open (unreleased) client terminals per session. */
  maxOpenTerminalsPerSession: number;
  /** Output bytes a terminal keeps (the tail); the agent's outputByteLimit may lower it. */
  maxTerminalOutputBytes: number;
  /** An agent process without a run for this long (ms) is stopped; the next run restarts it. */
  idleAgentTtlMs: number;
  /** Agent processes alive at once on this host; at the cap the least recently used idle agent is stopped. */
  maxAgents: number;
  /** How long (ms) the host remembers an ended session without an agent (to resume its ACP session). */
  sessionRecordTtlMs: number;
  /** Backstop for a paused question when StartRun carries no interaction_deadline_ms, in ms. */
  defaultInteractionDeadlineMs: number;
  /** How long paused runs are held after the link breaks, waiting for a reconnect, in ms. */
  heldRunGraceMs: number;
  /** After session/cancel, how long the agent has to confirm before its process is killed, in ms. */
  cancelGraceMs: number;
  /** First reconnect delay, in ms (doubles each attempt, with jitter). */
  reconnectInitialMs: number;
  /** Largest reconnect delay, in ms. */
  reconnectMaxMs: number;
  /** Interval of the host's pings, in ms (the core's Welcome may override it). */
  pingIntervalMs: number;
  /** Silence after which the link counts as broken, in ms (the core's Welcome may override it). */
  livenessTimeoutMs: number;
}

/** Defaults of every limit. */
export const defaultInternHostLimits: Readonly<InternHostLimits> = Object.freeze({
  maxConcurrentRuns: 8,
  maxPausedRuns: 16,
  maxQueuedBytesPerRun: 4 * 1024 * 1024,
  maxRunDurationMs: 60 * 60 * 1000,
  agentStartBudgetMs: 30_000,
  maxAcpLineBytes: 8 * 1024 * 1024,
  maxOpenTerminalsPerSession: 8,
  maxTerminalOutputBytes: 1024 * 1024,
  idleAgentTtlMs: 15 * 60 * 1000,
  maxAgents: 8,
  sessionRecordTtlMs: 24 * 60 * 60 * 1000,
  defaultInteractionDeadlineMs: 5 * 60 * 1000,
  heldRunGraceMs: 30_000,
  cancelGraceMs: 5_000,
  reconnectInitialMs: 250,
  reconnectMaxMs: 15_000,
  pingIntervalMs: 2_000,
  livenessTimeoutMs: 6_000,
});

/** Everything createInternHost needs. */
export interface InternHostOptions {
  /**
   * Core base URL, e.g. http://core:50051 (HTTP/2, gRPC), or several separated by commas: the host
   * holds one link, to the first core that answers, and moves on to the next when it breaks.
   * Ignored when `transport` is given.
   */
  coreUrl?: string;
  /** A ready Connect transport (tests, in-process embedding). */
  transport?: Transport;
  /** TLS settings for an https core URL: a CA bundle (default: system CAs) or a pinned certificate. */
  tls?: HostTlsOptions;
  /** Host token, sent as "Authorization: Bearer <token>". Never logged. */
  token: string;
  /** The agent to drive. */
  profile: AgentProfile;
  /**
   * Root of working folders: sessions live under `<workRoot>/sessions/<session>`, the intern's
   * isolated HOME under `<workRoot>/home`.
   */
  workRoot: string;
  /** Limits; missing fields take {@link defaultInternHostLimits}. */
  limits?: Partial<InternHostLimits>;
  /** Logger; the host never logs tokens, env values or prompt text at info level. */
  logger?: Logger;
  /**
   * When the host runs as root, agents and terminals run as this uid/gid (folders chowned).
   * Default {uid: 65534, gid: 65534}; null keeps root.
   */
  runAs?: { uid: number; gid: number } | null;
  /** Path of bwrap; default: looked up on PATH. null disables bubblewrap (manual mode then refuses shell commands). */
  bwrapPath?: string | null;
  /** Host software version sent in Hello. */
  hostVersion?: string;
  /** Replaces spawning the profile's command (tests run agents in-process). */
  launcher?: AgentLauncher;
}

/** Limits with defaults applied. */
export function resolveLimits(limits: Partial<InternHostLimits> | undefined): InternHostLimits {
  const out: InternHostLimits = { ...defaultInternHostLimits };
  for (const [k, v] of Object.entries(limits ?? {})) {
    if (typeof v === "number" && Number.isFinite(v) && v >= 0) (out as unknown as Record<string, number>)[k] = v;
  }
  return out;
}

/*
 * Environment variables (defined in src/lib/host-settings.ts, read by internHostOptionsFromEnv and, for
 * the embedded host of `portico serve`, by src/config.ts; all optional, integers):
 *   PORTICO_HOST_MAX_CONCURRENT_RUNS        maxConcurrentRuns              default 8
 *   PORTICO_HOST_MAX_PAUSED_RUNS            maxPausedRuns                  default 16
 *   PORTICO_HOST_MAX_QUEUED_BYTES_PER_RUN   maxQueuedBytesPerRun           default 4194304
 *   PORTICO_HOST_MAX_RUN_DURATION_MS        maxRunDurationMs               default 3600000
 *   PORTICO_HOST_AGENT_START_BUDGET_MS      agentStartBudgetMs             default 30000
 *   PORTICO_HOST_MAX_ACP_LINE_BYTES         maxAcpLineBytes                default 8388608
 *   PORTICO_HOST_MAX_OPEN_TERMINALS         maxOpenTerminalsPerSession     default 8
 *   PORTICO_HOST_MAX_TERMINAL_OUTPUT_BYTES  maxTerminalOutputBytes         default 1048576
 *   PORTICO_HOST_IDLE_AGENT_TTL_MS          idleAgentTtlMs                 default 900000
 *   PORTICO_HOST_MAX_AGENTS                 maxAgents                      default 8
 *   PORTICO_HOST_SESSION_RECORD_TTL_MS      sessionRecordTtlMs             default 86400000
 *   PORTICO_HOST_INTERACTION_DEADLINE_MS    defaultInteractionDeadlineMs   default 300000
 *   PORTICO_HOST_HELD_RUN_GRACE_MS          heldRunGraceMs                 default 30000
 *   PORTICO_HOST_CANCEL_GRACE_MS            cancelGraceMs                  default 5000
 *   PORTICO_HOST_RECONNECT_INITIAL_MS       reconnectInitialMs             default 250
 *   PORTICO_HOST_RECONNECT_MAX_MS           reconnectMaxMs                 default 15000
 *   PORTICO_HOST_PING_INTERVAL_MS           pingIntervalMs                 default 2000
 *   PORTICO_HOST_LIVENESS_TIMEOUT_MS        livenessTimeoutMs              default 6000
 * Non-limit settings:
 *   PORTICO_HOST_CORE_URL                   coreUrl
 *   PORTICO_HOST_TOKEN                      token (never logged)
 *   PORTICO_HOST_TOKEN_FILE                 file holding the token (read by the CLI)
 *   PORTICO_HOST_CA_FILE                    CA bundle (PEM) that verifies an https core (read by the CLI)
 *   PORTICO_HOST_WORK_ROOT                  workRoot
 *   PORTICO_HOST_PROFILE                    path of an agent profile JSON file
 *   PORTICO_HOST_BWRAP                      bwrap path, or "off" to disable bubblewrap
 *   PORTICO_HOST_RUN_AS                     "uid:gid" used when running as root, or "off"
 */
/** The limit variables; each names a limit of the host (checked by the compiler). */
export const ENV_LIMITS: Readonly<Record<string, keyof InternHostLimits>> = HOST_LIMIT_VARIABLES;

/**
 * Reads the PORTICO_HOST_* variables (listed above) into a partial InternHostOptions. Throws on a
 * malformed value, naming the variable, so a typo never silently falls back to a default.
 */
export function internHostOptionsFromEnv(env: NodeJS.ProcessEnv): Partial<InternHostOptions> & { limits: Partial<InternHostLimits> } {
  const e = parseHostSettings(env);
  const out: Partial<InternHostOptions> & { limits: Partial<InternHostLimits> } = { limits: e.limits };
  if (e.coreUrl) out.coreUrl = e.coreUrl;
  if (e.token) out.token = e.token;
  if (e.workRoot) out.workRoot = e.workRoot;
  if (e.profileFile) out.profile = loadAgentProfile(e.profileFile);
  if (e.bwrapPath !== undefined) out.bwrapPath = e.bwrapPath;
  if (e.runAs !== undefined) out.runAs = e.runAs;
  return out;
}

/** Reads and validates an agent profile JSON file. */
export function loadAgentProfile(file: string): AgentProfile {
  const raw: unknown = JSON.parse(readFileSync(file, "utf8"));
  return validateAgentProfile(raw);
}

const must = (what: string) => ({ error: () => `must be ${what}` });
const strings = must("an array of strings");
const envStrings = must("an object of strings");
const cwdForms = must('"session", "intern" or {"fixed": "/absolute/path"}');

/** The agent profile file, field by field (unknown fields are ignored). Every message names the field. */
const AgentProfileFile = z.looseObject({
  command: z.string(must("a non-empty string")).min(1, must("a non-empty string")),
  args: z.array(z.string(strings), strings).optional(),
  env: z.record(z.string(), z.string(envStrings), envStrings).optional(),
  inheritEnv: z.enum(["all", "minimal"], must('"all" or "minimal"')).optional(),
  cwd: z.union([z.enum(["session", "intern"]), z.object({ fixed: z.string().startsWith("/") })], cwdForms).optional(),
  modes: z
    .object({ selfDrive: z.string(must("a string")).optional(), manual: z.string(must("a string")).optional() }, must("an object"))
    .optional(),
  offerTerminal: z.boolean(must("a boolean")).optional(),
  offerFs: z.boolean(must("a boolean")).optional(),
  sandbox: z.enum(["terminal", "process", "none"], must('"terminal", "process" or "none"')).optional(),
  authMethod: z.string(must("a non-empty string")).min(1, must("a non-empty string")).optional(),
  name: z.string(must("a string")).optional(),
  modelGateway: z.enum(MODEL_GATEWAY_FAMILIES, must(MODEL_GATEWAY_FAMILIES.map((f) => `"${f}"`).join(", "))).optional(),
});

/** Validates an agent profile object (from JSON); throws with a message naming the bad field. */
export function validateAgentProfile(raw: unknown): AgentProfile {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error("agent profile must be a JSON object");
  const parsed = AgentProfileFile.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    // The field is the profile key (modes.<key> inside modes); list indexes and env names stay out.
    const field = issue.path[0] === "modes" ? issue.path.slice(0, 2).join(".") : String(issue.path[0]);
    throw new Error(`agent profile: ${field} ${issue.message}`);
  }
  const { command, args, env, inheritEnv, cwd, modes, offerTerminal, offerFs, sandbox, authMethod, name, modelGateway } = parsed.data;
  const out: AgentProfile = { command };
  if (args !== undefined) out.args = args;
  if (env !== undefined) out.env = env;
  if (inheritEnv !== undefined) out.inheritEnv = inheritEnv;
  if (cwd !== undefined) out.cwd = typeof cwd === "string" ? cwd : { fixed: cwd.fixed };
  if (modes !== undefined) {
    out.modes = {};
    if (modes.selfDrive !== undefined) out.modes.selfDrive = modes.selfDrive;
    if (modes.manual !== undefined) out.modes.manual = modes.manual;
  }
  if (offerTerminal !== undefined) out.offerTerminal = offerTerminal;
  if (offerFs !== undefined) out.offerFs = offerFs;
  if (sandbox !== undefined) out.sandbox = sandbox;
  if (authMethod !== undefined) out.authMethod = authMethod;
  if (name !== undefined) out.name = name;
  if (modelGateway !== undefined) out.modelGateway = modelGateway;
  return out;
}
