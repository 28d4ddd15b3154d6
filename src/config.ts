/**
 * The one typed configuration module. Every environment variable Portico reads is parsed here, with
 * one zod definition of the variables (the composition root passes the result down); no other module
 * reads process.env. Errors name the variable at fault.
 */
import { resolve } from "node:path";
import { parseHostSettings, type HostLimitName } from "./lib/host-settings.js";
import ipaddr from "ipaddr.js";
import { boolSetting, emptyAsAbsent, intSetting, optionalInt, settingsMessage, textSetting, z } from "./lib/settings.js";

export interface InternChatConfig {
  /** How long a paused run waits for the caller's answer (PORTICO_INTERACTION_DEADLINE_MS). */
  interactionDeadlineMs: number;
  /** Idle time after which the stream carries a heartbeat (PORTICO_HEARTBEAT_INTERVAL_MS). */
  heartbeatIntervalMs: number;
  /** Intern turns a key may start per window (PORTICO_INTERN_RATE_LIMIT). */
  rateLimitTurns: number;
  /** Window of the intern turn rate limit in seconds (PORTICO_INTERN_RATE_WINDOW_S). */
  rateLimitWindowSeconds: number;
  /** How long the core waits for the host to start a run (PORTICO_INTERN_START_TIMEOUT_MS). */
  startTimeoutMs: number;
  /** Longest accepted prompt, in characters (PORTICO_INTERN_MAX_PROMPT_CHARS). */
  maxPromptChars: number;
  /** Liveness ping interval on host links (PORTICO_LINK_PING_INTERVAL_MS). */
  linkPingIntervalMs: number;
  /** Silence after which a host link counts as broken (PORTICO_LINK_LIVENESS_TIMEOUT_MS). */
  linkLivenessTimeoutMs: number;
  /**
   * Manual-mode runs (those that may pause on a question) one caller key may hold open on an intern
   * at once (PORTICO_INTERN_MAX_PAUSED_PER_KEY); 0, the default, means half of what the intern's host
   * holds (at least 1), so one key never fills the host for the others.
   */
  maxPausedRunsPerKey: number;
  /** URL other core processes use to reach this one for intern calls (PORTICO_CORE_ADVERTISE_URL); default the listener's URL. */
  advertiseUrl: string | undefined;
  /** Prefix of the Redis keys and channels of the intern cross-instance path (PORTICO_REDIS_PREFIX). */
  redisPrefix: string;
  /**
   * Base URL of this Portico's HTTP gateway as intern hosts reach it, without a trailing slash
   * (PORTICO_INTERN_GATEWAY_URL, else PORTICO_PUBLIC_URL; `portico serve` defaults to its own listening address).
   * Set: an intern with a model sends its agent's model calls through it, with a per-run credential
   * (docs/interns.md, "Model calls through Portico"). Unset: agents use the providers their profiles name.
   */
  gatewayUrl: string | undefined;
  /** Lifetime of a run's model credential from the run's start (PORTICO_INTERN_RUN_CREDENTIAL_TTL_MS, default 4 h). */
  runCredentialTtlMs: number;
}

/**
 * Time limits of chat completions (docs/operations.md, "Chat completions: time limits and re-sends") and the bounds
 * on one request and one key (docs/chat.md, "Limits — one key, one request").
 */
export interface ChatConfig {
  /**
   * Streamed attempts: the provider's response (status line and headers) must begin within this many ms,
   * else the next candidate is tried (PORTICO_UPSTREAM_FIRST_BYTE_TIMEOUT_MS, default 60000).
   */
  firstByteTimeoutMs: number;
  /**
   * Non-streamed attempts: the provider's answer, which it sends whole once generated, must begin within this
   * many ms, else the next candidate is tried (PORTICO_UPSTREAM_ANSWER_TIMEOUT_MS, default 300000).
   */
  answerTimeoutMs: number;
  /**
   * The request's budget: its answer (a stream's first chunk, a whole non-streamed answer) must begin within
   * this many ms of its arrival, over every attempt, else 504 `timeout` (PORTICO_CHAT_BUDGET_MS, default
   * 600000). Callers may lower it with the `x-request-timeout-ms` header or a gRPC deadline.
   */
  budgetMs: number;
  /**
   * Upstream attempts one chat request may make (PORTICO_CHAT_MAX_ATTEMPTS, 1–100, default 10): the planned
   * (model, provider, credential) attempts past this bound are not tried, and the error says how many were cut.
   */
  maxAttempts: number;
  /**
   * Retry rounds over the same candidates after an outage or timeout, each after a backoff with full jitter
   * inside the request's budget (docs/operations.md, "Retries and fallback"): PORTICO_CHAT_RETRIES (0–5,
   * default 0), PORTICO_CHAT_RETRY_BASE_MS (default 250) and PORTICO_CHAT_RETRY_MAX_MS (default 4000).
   */
  retries: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /**
   * Streams: the bytes-per-second floor of the probe before the first byte is relayed
   * (PORTICO_STREAM_MIN_BYTES_PER_SECOND, default 0 = no probe) and the probe's length
   * (PORTICO_STREAM_PROBE_MS, default 2000).
   */
  streamFloorBytesPerSecond: number;
  streamProbeMs: number;
  /**
   * Chat completions (streams included) one API key may have in flight at once, counted across every process
   * that shares REDIS_URL, or across the workers of one `portico serve` without it
   * (PORTICO_CHAT_MAX_CONCURRENT_PER_KEY, 0–100000, default 64; 0 = no bound). One more answers 429 `rate_limited`
   * with `Retry-After`.
   */
  maxConcurrentPerKey: number;
  /**
   * A spend reservation not settled within this many ms is released, its process presumed dead
   * (PORTICO_SPEND_RESERVATION_TTL_MS, 100–86400000, default 300000; docs/limits.md). A live stream extends its own.
   */
  spendReservationTtlMs: number;
  /**
   * The health memory (docs/routing.md, "The health memory"): the first cool-down of a rate-limited credential or
   * a failing endpoint, doubled with each consecutive failure (PORTICO_COOLDOWN_BASE_MS, 10–600000, default 1000)
   * up to PORTICO_COOLDOWN_MAX_MS (10–3600000, default 30000; below the first, the first is the longest too). A
   * provider's `Retry-After` replaces the step.
   */
  cooldownBaseMs: number;
  cooldownMaxMs: number;
  /**
   * Credentials of one tier (docs/routing.md, "Load balancing"): "balanced" draws them by weight, "ordered" keeps
   * `sort_order` as a strict order (PORTICO_CREDENTIAL_ORDER, default balanced).
   */
  credentialOrder: "balanced" | "ordered";
  /** Sticky sessions (docs/routing.md): a pin lives this long after its last use (PORTICO_STICKY_TTL_MS, 0 = off, default 3600000). */
  stickyTtlMs: number;
  /** Pins kept in memory without Redis (PORTICO_STICKY_MAX_SESSIONS, default 10000). */
  stickyMaxSessions: number;
}

/** The bounds on one chat request and one key. */
export type ChatLimitsConfig = Pick<ChatConfig, "maxAttempts" | "maxConcurrentPerKey" | "spendReservationTtlMs">;

export interface ByokConfig {
  /**
   * Master key material (PORTICO_MASTER_KEY): base64 or hex of 32 bytes, or a keyring JSON
   * `{"primary": "<id>", "keys": {"<id>": "<base64>"}}`. Takes precedence over the key file.
   */
  masterKey: string | undefined;
  /**
   * File holding the key or keyring JSON (PORTICO_MASTER_KEY_FILE); default <dataDir>/master.key,
   * created with mode 0600 on first run outside production mode.
   */
  masterKeyFile: string | undefined;
}

export interface ProviderEndpointConfig {
  /**
   * Base URL overrides by provider, keyed by the slug's environment form (upper case, every character
   * other than a letter or digit as `_`): PORTICO_PROVIDER_<SLUG>_BASE_URL.
   */
  baseUrls: Record<string, string>;
  /** Operator-added OpenAI-compatible providers, slug → base URL (PORTICO_OPENAI_COMPATIBLE_PROVIDERS). */
  extraOpenAICompatible: Record<string, string>;
  /**
   * Time limits per provider, keyed like `baseUrls` (docs/operations.md, "Upstream time limits per provider"):
   * PORTICO_PROVIDER_<SLUG>_CONNECT_TIMEOUT_MS, _FIRST_BYTE_TIMEOUT_MS (streamed attempts), _IDLE_TIMEOUT_MS.
   */
  limits?: Record<string, { connectMs?: number; firstByteMs?: number; idleMs?: number }>;
  /**
   * Operator-added providers whose server needs no key, e.g. a local Ollama or vLLM
   * (PORTICO_KEYLESS_PROVIDERS, a comma-separated list of slugs of PORTICO_OPENAI_COMPATIBLE_PROVIDERS):
   * requests are routed to them without a credential, and without an `Authorization` header.
   */
  keyless: string[];
}

/**
 * The moderation provider of the `moderation` plugin (docs/plugins.md): an API of OpenAI's moderations shape
 * (`POST <base>/moderations` with `{model, input}`, answering `{results: [{flagged, categories, category_scores}]}`).
 */
export interface ModerationConfig {
  /** Base URL, e.g. https://api.openai.com/v1 (PORTICO_MODERATION_BASE_URL; unset: moderation is not configured). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <key>` (PORTICO_MODERATION_API_KEY; unset: no header). Never logged or returned. */
  apiKey: string | undefined;
  /** The `model` field of the moderation request (PORTICO_MODERATION_MODEL, default omni-moderation-latest). */
  model: string;
  /** The moderation answer must arrive within this many ms (PORTICO_MODERATION_TIMEOUT_MS, 100–600000, default 10000). */
  timeoutMs: number;
}

/** Settings of the chat plugins (docs/plugins.md). */
export interface PluginsConfig {
  /** The moderation provider; undefined: not configured (a request asking for `moderation` gets 400 saying so). */
  moderation: ModerationConfig | undefined;
}

/**
 * The PORTICO_HOST_* settings `portico serve`'s embedded host applies (docs/intern-host.md): every limit,
 * PORTICO_HOST_BWRAP and PORTICO_HOST_RUN_AS. The others name what the embedded host decides itself.
 */
export interface EmbeddedHostSettings {
  /** The PORTICO_HOST_* limits that were set (unset ones keep the host's defaults). */
  limits: Partial<Record<HostLimitName, number>>;
  /** PORTICO_HOST_BWRAP: a bwrap path, or null ("off"); absent: looked up on PATH. */
  bwrapPath?: string | null;
  /** PORTICO_HOST_RUN_AS: "uid:gid", or null ("off": a root serve runs the agent as root); absent: 65534:65534 as root. */
  runAs?: { uid: number; gid: number } | null;
  /**
   * PORTICO_HOST_* variables that were set but do not apply to the embedded host (CORE_URL, TOKEN,
   * TOKEN_FILE, CA_FILE, WORK_ROOT, PROFILE: it dials its own core with a token only that core accepts,
   * keeps its folders under PORTICO_DATA_DIR and runs the built-in agent); `serve` logs them.
   */
  ignored: string[];
}

/** PORTICO_HOST_* variables that only `portico intern-host` reads. */
const HOST_ONLY_VARIABLES = [
  "PORTICO_HOST_CORE_URL",
  "PORTICO_HOST_TOKEN",
  "PORTICO_HOST_TOKEN_FILE",
  "PORTICO_HOST_CA_FILE",
  "PORTICO_HOST_WORK_ROOT",
  "PORTICO_HOST_PROFILE",
];

function embeddedHostSettings(env: NodeJS.ProcessEnv): EmbeddedHostSettings {
  let host: ReturnType<typeof parseHostSettings>;
  try {
    host = parseHostSettings(env);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  const out: EmbeddedHostSettings = { limits: host.limits, ignored: HOST_ONLY_VARIABLES.filter((name) => Boolean(env[name])) };
  if (host.bwrapPath !== undefined) out.bwrapPath = host.bwrapPath;
  if (host.runAs !== undefined) out.runAs = host.runAs;
  return out;
}

/**
 * Trace export over OTLP (docs/operations.md, "Tracing"), from the standard OpenTelemetry variables. Absent
 * (tracing off, the SDK never loaded) unless OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is
 * set and OTEL_SDK_DISABLED is not true.
 */
export interface TracingConfig {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/traces`. */
  url: string;
  /** OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL: `http/protobuf` (default) or `http/json`. */
  protocol: "http/protobuf" | "http/json";
  /** Headers sent with each export (OTEL_EXPORTER_OTLP_HEADERS, then OTEL_EXPORTER_OTLP_TRACES_HEADERS over it): `k=v,k2=v2`, values URL-encoded. */
  headers: Record<string, string>;
  /** `service.name` of the spans (OTEL_SERVICE_NAME, default `portico`). */
  serviceName: string;
  /** Longest wait before a batch of ended spans is exported, in ms (OTEL_BSP_SCHEDULE_DELAY, default 5000). */
  scheduleDelayMs: number;
  /** Most spans queued for export; more are dropped (OTEL_BSP_MAX_QUEUE_SIZE, default 2048). */
  maxQueueSize: number;
  /** Most spans in one export request (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, default 512; at most the queue's size). */
  maxExportBatchSize: number;
  /**
   * Which traces are recorded (OTEL_TRACES_SAMPLER, default `parentbased_always_on`, and OTEL_TRACES_SAMPLER_ARG, the
   * ratio of `traceidratio` / `parentbased_traceidratio`, default 1): `parentBased` follows the caller's sampled flag
   * when it sent a `traceparent`; `ratio` is the share of new traces recorded (0: none, 1: all).
   */
  sampler: { parentBased: boolean; ratio: number };
}

/** OTEL_TRACES_SAMPLER's values (the OpenTelemetry SDK environment specification), as (parent-based, fixed ratio or undefined: the argument's). */
const SAMPLERS: Record<string, { parentBased: boolean; ratio?: number }> = {
  always_on: { parentBased: false, ratio: 1 },
  always_off: { parentBased: false, ratio: 0 },
  traceidratio: { parentBased: false },
  parentbased_always_on: { parentBased: true, ratio: 1 },
  parentbased_always_off: { parentBased: true, ratio: 0 },
  parentbased_traceidratio: { parentBased: true },
};

function samplerSetting(name: string | undefined, arg: string | undefined): TracingConfig["sampler"] {
  const kind = SAMPLERS[(name ?? "parentbased_always_on").trim().toLowerCase()];
  if (!kind) throw new ConfigError(`OTEL_TRACES_SAMPLER must be one of ${Object.keys(SAMPLERS).join(", ")}`);
  if (kind.ratio !== undefined) return { parentBased: kind.parentBased, ratio: kind.ratio };
  const ratio = arg === undefined || arg.trim() === "" ? 1 : Number(arg);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) throw new ConfigError("OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 (the share of traces sampled)");
  return { parentBased: kind.parentBased, ratio };
}

export interface Config {
  /** Folder for the embedded SQLite database, master key and intern working folders (PORTICO_DATA_DIR). */
  dataDir: string;
  /** PostgreSQL URL; when unset the embedded SQLite database is used (DATABASE_URL). */
  databaseUrl: string | undefined;
  /** Redis URL for state shared by several core processes, e.g. the intern turn rate limit (REDIS_URL). */
  redisUrl: string | undefined;
  /** Interface both listeners bind to (HOST). */
  host: string;
  /** Port of the public HTTP API (PORT). */
  httpPort: number;
  /** Port of the core's Connect/gRPC/gRPC-Web listener (PORTICO_GRPC_PORT). */
  grpcPort: number;
  /** Certificate and key files (PEM) for TLS on the core's listener (PORTICO_GRPC_TLS_CERT_FILE, PORTICO_GRPC_TLS_KEY_FILE); unset: h2c. */
  grpcTls: { certFile: string; keyFile: string } | undefined;
  /** Core URL the split gateway dials (PORTICO_CORE_URL). */
  coreUrl: string;
  /** The split gateway sends its unary calls on the hop channel (PORTICO_CORE_HOP_CHANNEL, default on; docs/architecture.md). */
  coreHopChannel: boolean;
  /** pino log level (PORTICO_LOG_LEVEL). */
  logLevel: string;
  /** Time a graceful stop may take after SIGTERM/SIGINT before the process exits anyway (PORTICO_SHUTDOWN_TIMEOUT_MS). */
  shutdownTimeoutMs: number;
  /** Production mode: refuse unsafe defaults such as a generated master key (PORTICO_PRODUCTION). */
  production: boolean;
  /** Largest accepted HTTP request body in bytes (PORTICO_BODY_LIMIT_BYTES). */
  bodyLimitBytes: number;
  /** Time a client has to send a whole request, headers and body, before 408 (PORTICO_REQUEST_TIMEOUT_MS). Responses, SSE streams included, are not limited. */
  requestTimeoutMs: number;
  /** Word used in place of a brand in public identifiers such as `service.provide_input` (PORTICO_BRAND). */
  brand: string;
  /** When set, GET /metrics requires `Authorization: Bearer <this token>` (PORTICO_METRICS_TOKEN). */
  metricsToken: string | undefined;
  /**
   * `portico core` only: an HTTP/1.1 port on HOST that answers GET /metrics with the core's own metrics
   * (PORTICO_METRICS_PORT; unset: none). The core's gRPC port speaks HTTP/2 only, which scrapers do not.
   */
  metricsPort: number | undefined;
  /** Whether `portico serve` attaches the embedded intern host with the built-in agent (PORTICO_EMBEDDED_HOST). */
  embeddedHost: boolean;
  /** What the embedded host takes from the PORTICO_HOST_* variables (limits, bubblewrap, run-as user). */
  embeddedHostSettings: EmbeddedHostSettings;
  /** Identifier of this process in logs and routing records (PORTICO_INSTANCE_ID). */
  instanceId: string;
  /**
   * Worker processes of `portico serve` (PORTICO_WORKERS): 0, the default, means one per CPU the machine
   * offers (os.availableParallelism()); 1 runs everything in the one process.
   */
  workers: number;
  /** Index of this worker, set by the `portico serve` primary for the processes it forks (PORTICO_WORKER_INDEX). */
  workerIndex: number | undefined;
  /**
   * Longest time, in ms, an authenticated API key is trusted from memory before it is read again
   * (PORTICO_AUTH_CACHE_TTL_MS, 0–1000, default 1000; 0 reads the database on every call). A key revoked
   * or disabled through any process is refused everywhere within this bound; through a process that
   * shares REDIS_URL, at once. Also bounds how long a changed account-wide routing setting
   * (docs/routing.md) may go unseen by a process the bus does not reach.
   */
  authCacheTtlMs: number;
  interns: InternChatConfig;
  chat: ChatConfig;
  /** Provider base URLs for chat completions (see docs/providers.md). */
  providers: ProviderEndpointConfig;
  byok: ByokConfig;
  /** The chat plugins' settings (docs/plugins.md). */
  plugins: PluginsConfig;
  /**
   * The operator's model catalog file (PORTICO_CATALOG_FILE; unset: the built-in catalog only), JSON merged
   * over the built-in catalog at start-up (docs/catalog.md). A file that breaks a rule stops the start.
   */
  catalogFile: string | undefined;
  /**
   * How often every process re-reads the catalog changes made through the management API
   * (PORTICO_CATALOG_REFRESH_MS, 50–600000, default 1000): the bound on a change reaching a process whose
   * invalidation message was lost (docs/catalog.md). Changes are announced on the bus at once besides.
   */
  catalogRefreshMs: number;
  /** OpenTelemetry trace export (docs/operations.md, "Tracing"); undefined: off. */
  tracing: TracingConfig | undefined;
  /** The server tools Portico runs in chat completions (docs/plugins.md, "Server tools"). */
  serverTools: ServerToolsConfig;
}

/** Settings of the server tools (docs/plugins.md, "Server tools"). */
export interface ServerToolsConfig {
  /** Most model calls of one request's server-tool loop (PORTICO_SERVER_TOOLS_MAX_TURNS, 1–32, default 8). */
  maxTurns: number;
  webFetch: {
    /**
     * Addresses and CIDR ranges outside the public unicast space that web_fetch may still connect to
     * (PORTICO_WEB_FETCH_ALLOW_ADDRESSES, comma-separated, e.g. `127.0.0.1,10.0.0.0/8`; default none).
     */
    allowAddresses: string[];
    /** Largest page body read, in bytes (PORTICO_WEB_FETCH_MAX_BYTES, default 2 MiB). */
    maxBytes: number;
    /** Time for one fetch, redirects included (PORTICO_WEB_FETCH_TIMEOUT_MS, default 10 s). */
    timeoutMs: number;
  };
  search: {
    /** The engine web_search uses (PORTICO_WEB_SEARCH_ENGINE: searxng or brave; default the one configured, SearXNG first). */
    engine: "searxng" | "brave" | undefined;
    /** A SearXNG instance's base URL (PORTICO_SEARXNG_URL); its settings must list `json` in `search.formats`. */
    searxngUrl: string | undefined;
    /** The Brave Search API's base URL (PORTICO_BRAVE_SEARCH_URL, default https://api.search.brave.com). */
    braveUrl: string;
    /** The Brave Search API key (PORTICO_BRAVE_SEARCH_API_KEY); never logged. */
    braveApiKey: string | undefined;
    /** Time for one search request (PORTICO_WEB_SEARCH_TIMEOUT_MS, default 10 s). */
    timeoutMs: number;
  };
}

export class ConfigError extends Error {}

function httpUrl(name: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an http(s) URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new ConfigError(`${name} must be an http(s) URL`);
  return raw.replace(/\/+$/, "");
}

function providerEndpoints(env: NodeJS.ProcessEnv): ProviderEndpointConfig {
  const baseUrls: Record<string, string> = {};
  for (const [name, raw] of Object.entries(env)) {
    const match = /^PORTICO_PROVIDER_([A-Z0-9_]+)_BASE_URL$/.exec(name);
    if (match && raw) baseUrls[match[1]!] = httpUrl(name, raw);
  }
  // Time limits: per provider, else the operator's defaults for every provider (connect 10 s, idle 300 s).
  const limits: Record<string, { connectMs?: number; firstByteMs?: number; idleMs?: number }> = {};
  const ms = (name: string, raw: string) => {
    const n = Number(raw);
    if (!/^\d+$/.test(raw.trim()) || n < 100 || n > 3_600_000) throw new ConfigError(`${name} must be an integer from 100 to 3600000 (milliseconds)`);
    return n;
  };
  const field = { CONNECT: "connectMs", FIRST_BYTE: "firstByteMs", IDLE: "idleMs" } as const;
  for (const [name, raw] of Object.entries(env)) {
    const match = /^PORTICO_PROVIDER_([A-Z0-9_]+?)_(CONNECT|FIRST_BYTE|IDLE)_TIMEOUT_MS$/.exec(name);
    if (match && raw) (limits[match[1]!] ??= {})[field[match[2] as keyof typeof field]] = ms(name, raw);
  }
  const defaults = {
    ...(env.PORTICO_UPSTREAM_CONNECT_TIMEOUT_MS ? { connectMs: ms("PORTICO_UPSTREAM_CONNECT_TIMEOUT_MS", env.PORTICO_UPSTREAM_CONNECT_TIMEOUT_MS) } : {}),
    ...(env.PORTICO_UPSTREAM_IDLE_TIMEOUT_MS ? { idleMs: ms("PORTICO_UPSTREAM_IDLE_TIMEOUT_MS", env.PORTICO_UPSTREAM_IDLE_TIMEOUT_MS) } : {}),
  };
  if (Object.keys(defaults).length > 0) limits["*"] = defaults;
  const extraOpenAICompatible: Record<string, string> = {};
  const list = env.PORTICO_OPENAI_COMPATIBLE_PROVIDERS || undefined;
  for (const entry of list ? list.split(",") : []) {
    const at = entry.indexOf("=");
    const slug = entry.slice(0, at).trim();
    if (at <= 0 || !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(slug)) {
      throw new ConfigError("PORTICO_OPENAI_COMPATIBLE_PROVIDERS must be a comma-separated list of slug=base-url (lowercase slugs)");
    }
    extraOpenAICompatible[slug] = httpUrl("PORTICO_OPENAI_COMPATIBLE_PROVIDERS", entry.slice(at + 1).trim());
  }
  const keyless: string[] = [];
  for (const entry of (env.PORTICO_KEYLESS_PROVIDERS || "").split(",")) {
    const slug = entry.trim();
    if (slug === "") continue;
    if (!(slug in extraOpenAICompatible)) {
      throw new ConfigError(
        "PORTICO_KEYLESS_PROVIDERS must list slugs that PORTICO_OPENAI_COMPATIBLE_PROVIDERS defines (comma-separated, e.g. ollama)",
      );
    }
    if (!keyless.includes(slug)) keyless.push(slug);
  }
  return { baseUrls, extraOpenAICompatible, keyless, limits };
}

/** `k=v,k2=v2` (values URL-encoded), the OTLP headers format; a malformed entry names the variable. */
function otlpHeaders(name: string, raw: string | undefined, into: Record<string, string>): void {
  for (const entry of (raw ?? "").split(",")) {
    if (entry.trim() === "") continue;
    const at = entry.indexOf("=");
    const key = entry.slice(0, at).trim().toLowerCase();
    if (at <= 0 || !/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(key)) throw new ConfigError(`${name} must be a comma-separated list of key=value`);
    let value: string;
    try {
      value = decodeURIComponent(entry.slice(at + 1).trim());
    } catch {
      throw new ConfigError(`${name}: the value of ${key} is not valid URL-encoding`);
    }
    into[key] = value;
  }
}

function tracingSettings(e: z.infer<typeof Env>): TracingConfig | undefined {
  if (e.OTEL_SDK_DISABLED) return undefined;
  let url: string;
  if (e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) url = httpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  else if (e.OTEL_EXPORTER_OTLP_ENDPOINT) url = `${httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT", e.OTEL_EXPORTER_OTLP_ENDPOINT)}/v1/traces`;
  else return undefined;
  const protocolName = e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? "http/protobuf";
  if (protocol !== "http/protobuf" && protocol !== "http/json") {
    throw new ConfigError(`${protocolName} must be http/protobuf or http/json (grpc is not supported)`);
  }
  const headers: Record<string, string> = {};
  otlpHeaders("OTEL_EXPORTER_OTLP_HEADERS", e.OTEL_EXPORTER_OTLP_HEADERS, headers);
  otlpHeaders("OTEL_EXPORTER_OTLP_TRACES_HEADERS", e.OTEL_EXPORTER_OTLP_TRACES_HEADERS, headers);
  return {
    url,
    protocol,
    headers,
    serviceName: e.OTEL_SERVICE_NAME ?? "portico",
    scheduleDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
    maxQueueSize: e.OTEL_BSP_MAX_QUEUE_SIZE,
    maxExportBatchSize: Math.min(e.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, e.OTEL_BSP_MAX_QUEUE_SIZE),
    sampler: samplerSetting(e.OTEL_TRACES_SAMPLER, e.OTEL_TRACES_SAMPLER_ARG),
  };
}

/** The variables Portico reads, their defaults and rules. */
const Env = z
  .looseObject({
    HOST: textSetting(),
    PORT: intSetting(8080, 0, 65535),
    PORTICO_GRPC_PORT: intSetting(50051, 0, 65535),
    PORTICO_BRAND: z.preprocess(
      emptyAsAbsent,
      z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, { error: () => "must be a short lowercase word" }).default("service"),
    ),
    PORTICO_GRPC_TLS_CERT_FILE: textSetting(),
    PORTICO_GRPC_TLS_KEY_FILE: textSetting(),
    PORTICO_DATA_DIR: textSetting(),
    DATABASE_URL: textSetting(),
    REDIS_URL: textSetting(),
    PORTICO_CORE_URL: textSetting(),
    PORTICO_CORE_HOP_CHANNEL: boolSetting(true),
    PORTICO_LOG_LEVEL: textSetting(),
    PORTICO_SHUTDOWN_TIMEOUT_MS: intSetting(10_000, 100, 600_000),
    PORTICO_PRODUCTION: boolSetting(false),
    PORTICO_BODY_LIMIT_BYTES: intSetting(1_048_576, 1024),
    PORTICO_REQUEST_TIMEOUT_MS: intSetting(30_000, 100, 3_600_000),
    PORTICO_EMBEDDED_HOST: boolSetting(true),
    PORTICO_INSTANCE_ID: textSetting(),
    PORTICO_WORKERS: intSetting(0, 0, 256),
    PORTICO_WORKER_INDEX: textSetting(),
    PORTICO_AUTH_CACHE_TTL_MS: intSetting(1000, 0, 1000),
    PORTICO_INTERACTION_DEADLINE_MS: intSetting(300_000, 100),
    PORTICO_HEARTBEAT_INTERVAL_MS: intSetting(30_000, 50),
    PORTICO_INTERN_RATE_LIMIT: intSetting(60, 1),
    PORTICO_INTERN_RATE_WINDOW_S: intSetting(60, 1),
    PORTICO_INTERN_START_TIMEOUT_MS: intSetting(30_000, 100),
    PORTICO_INTERN_MAX_PROMPT_CHARS: intSetting(32_000, 1),
    PORTICO_LINK_PING_INTERVAL_MS: intSetting(1_000, 50),
    PORTICO_LINK_LIVENESS_TIMEOUT_MS: intSetting(4_000, 200),
    PORTICO_INTERN_MAX_PAUSED_PER_KEY: intSetting(0, 0, 10_000),
    PORTICO_CHAT_MAX_ATTEMPTS: intSetting(10, 1, 100),
    PORTICO_CHAT_RETRIES: intSetting(0, 0, 5),
    PORTICO_CHAT_RETRY_BASE_MS: intSetting(250, 1, 60_000),
    PORTICO_CHAT_RETRY_MAX_MS: intSetting(4_000, 1, 600_000),
    PORTICO_STREAM_MIN_BYTES_PER_SECOND: intSetting(0, 0, 1_000_000),
    PORTICO_STREAM_PROBE_MS: intSetting(2_000, 100, 60_000),
    PORTICO_CHAT_MAX_CONCURRENT_PER_KEY: intSetting(64, 0, 100_000),
    PORTICO_SPEND_RESERVATION_TTL_MS: intSetting(300_000, 100, 86_400_000),
    PORTICO_COOLDOWN_BASE_MS: intSetting(1_000, 10, 600_000),
    PORTICO_COOLDOWN_MAX_MS: intSetting(30_000, 10, 3_600_000),
    PORTICO_CORE_ADVERTISE_URL: textSetting(),
    PORTICO_INTERN_GATEWAY_URL: textSetting(),
    PORTICO_PUBLIC_URL: textSetting(),
    PORTICO_INTERN_RUN_CREDENTIAL_TTL_MS: intSetting(4 * 60 * 60 * 1000, 60_000, 7 * 24 * 60 * 60 * 1000),
    PORTICO_REDIS_PREFIX: textSetting(),
    PORTICO_UPSTREAM_FIRST_BYTE_TIMEOUT_MS: intSetting(60_000, 100, 3_600_000),
    PORTICO_CREDENTIAL_ORDER: z.preprocess(emptyAsAbsent, z.enum(["balanced", "ordered"]).default("balanced")),
    PORTICO_STICKY_TTL_MS: intSetting(3_600_000, 0, 86_400_000),
    PORTICO_STICKY_MAX_SESSIONS: intSetting(10_000, 1, 10_000_000),
    PORTICO_UPSTREAM_ANSWER_TIMEOUT_MS: intSetting(300_000, 100, 3_600_000),
    PORTICO_CHAT_BUDGET_MS: intSetting(600_000, 100, 3_600_000),
    PORTICO_MASTER_KEY: textSetting(),
    PORTICO_MASTER_KEY_FILE: textSetting(),
    PORTICO_CATALOG_FILE: textSetting(),
    PORTICO_CATALOG_REFRESH_MS: intSetting(1000, 50, 600_000),
    PORTICO_MODERATION_BASE_URL: textSetting(),
    PORTICO_MODERATION_API_KEY: textSetting(),
    PORTICO_MODERATION_MODEL: textSetting(),
    PORTICO_MODERATION_TIMEOUT_MS: intSetting(10_000, 100, 600_000),
    PORTICO_METRICS_PORT: optionalInt(0, 65535),
    OTEL_SDK_DISABLED: boolSetting(false),
    OTEL_EXPORTER_OTLP_ENDPOINT: textSetting(),
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: textSetting(),
    OTEL_EXPORTER_OTLP_PROTOCOL: textSetting(),
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: textSetting(),
    OTEL_EXPORTER_OTLP_HEADERS: textSetting(),
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: textSetting(),
    OTEL_SERVICE_NAME: textSetting(),
    OTEL_BSP_SCHEDULE_DELAY: intSetting(5000, 1, 3_600_000),
    OTEL_BSP_MAX_QUEUE_SIZE: intSetting(2048, 1, 1_000_000),
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: intSetting(512, 1, 1_000_000),
    OTEL_TRACES_SAMPLER: textSetting(),
    OTEL_TRACES_SAMPLER_ARG: textSetting(),
    PORTICO_SERVER_TOOLS_MAX_TURNS: intSetting(8, 1, 32),
    PORTICO_WEB_FETCH_ALLOW_ADDRESSES: textSetting(),
    PORTICO_WEB_FETCH_MAX_BYTES: intSetting(2_097_152, 1024, 104_857_600),
    PORTICO_WEB_FETCH_TIMEOUT_MS: intSetting(10_000, 100, 600_000),
    PORTICO_WEB_SEARCH_ENGINE: z.preprocess(emptyAsAbsent, z.enum(["searxng", "brave"]).optional()),
    PORTICO_SEARXNG_URL: textSetting(),
    PORTICO_BRAVE_SEARCH_URL: textSetting(),
    PORTICO_BRAVE_SEARCH_API_KEY: textSetting(),
    PORTICO_WEB_SEARCH_TIMEOUT_MS: intSetting(10_000, 100, 600_000),
    PORTICO_METRICS_TOKEN: textSetting({ pattern: /^[\x21-\x7e]{16,256}$/, problem: "must be 16 to 256 printable characters without spaces" }),
  })
  .superRefine((env, ctx) => {
    if (Boolean(env.PORTICO_GRPC_TLS_CERT_FILE) !== Boolean(env.PORTICO_GRPC_TLS_KEY_FILE)) {
      ctx.addIssue({ code: "custom", path: ["PORTICO_GRPC_TLS_CERT_FILE"], message: "and PORTICO_GRPC_TLS_KEY_FILE must be set together" });
    }
  });

/** Parses the environment; a malformed value is a ConfigError naming the variable, never a guess. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = Env.safeParse(env);
  if (!parsed.success) throw new ConfigError(settingsMessage(parsed.error));
  const e = parsed.data;
  const certFile = e.PORTICO_GRPC_TLS_CERT_FILE;
  const keyFile = e.PORTICO_GRPC_TLS_KEY_FILE;
  return {
    grpcTls: certFile && keyFile ? { certFile: resolve(certFile), keyFile: resolve(keyFile) } : undefined,
    dataDir: resolve(e.PORTICO_DATA_DIR ?? "./data"),
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    host: e.HOST ?? "127.0.0.1",
    httpPort: e.PORT,
    grpcPort: e.PORTICO_GRPC_PORT,
    coreUrl: e.PORTICO_CORE_URL ?? `http://127.0.0.1:${e.PORTICO_GRPC_PORT}`,
    coreHopChannel: e.PORTICO_CORE_HOP_CHANNEL,
    logLevel: e.PORTICO_LOG_LEVEL ?? "info",
    shutdownTimeoutMs: e.PORTICO_SHUTDOWN_TIMEOUT_MS,
    production: e.PORTICO_PRODUCTION,
    bodyLimitBytes: e.PORTICO_BODY_LIMIT_BYTES,
    requestTimeoutMs: e.PORTICO_REQUEST_TIMEOUT_MS,
    brand: e.PORTICO_BRAND,
    metricsToken: e.PORTICO_METRICS_TOKEN,
    metricsPort: e.PORTICO_METRICS_PORT,
    embeddedHost: e.PORTICO_EMBEDDED_HOST,
    embeddedHostSettings: embeddedHostSettings(env),
    instanceId: e.PORTICO_INSTANCE_ID ?? `core-${process.pid}`,
    workers: e.PORTICO_WORKERS,
    workerIndex: e.PORTICO_WORKER_INDEX === undefined ? undefined : Number(e.PORTICO_WORKER_INDEX),
    authCacheTtlMs: e.PORTICO_AUTH_CACHE_TTL_MS,
    interns: {
      interactionDeadlineMs: e.PORTICO_INTERACTION_DEADLINE_MS,
      heartbeatIntervalMs: e.PORTICO_HEARTBEAT_INTERVAL_MS,
      rateLimitTurns: e.PORTICO_INTERN_RATE_LIMIT,
      rateLimitWindowSeconds: e.PORTICO_INTERN_RATE_WINDOW_S,
      startTimeoutMs: e.PORTICO_INTERN_START_TIMEOUT_MS,
      maxPromptChars: e.PORTICO_INTERN_MAX_PROMPT_CHARS,
      linkPingIntervalMs: e.PORTICO_LINK_PING_INTERVAL_MS,
      linkLivenessTimeoutMs: e.PORTICO_LINK_LIVENESS_TIMEOUT_MS,
      maxPausedRunsPerKey: e.PORTICO_INTERN_MAX_PAUSED_PER_KEY,
      advertiseUrl: e.PORTICO_CORE_ADVERTISE_URL,
      gatewayUrl: e.PORTICO_INTERN_GATEWAY_URL
        ? httpUrl("PORTICO_INTERN_GATEWAY_URL", e.PORTICO_INTERN_GATEWAY_URL)
        : e.PORTICO_PUBLIC_URL
          ? httpUrl("PORTICO_PUBLIC_URL", e.PORTICO_PUBLIC_URL)
          : undefined,
      runCredentialTtlMs: e.PORTICO_INTERN_RUN_CREDENTIAL_TTL_MS,
      redisPrefix: e.PORTICO_REDIS_PREFIX ?? "portico:",
    },
    chat: {
      firstByteTimeoutMs: e.PORTICO_UPSTREAM_FIRST_BYTE_TIMEOUT_MS,
      answerTimeoutMs: e.PORTICO_UPSTREAM_ANSWER_TIMEOUT_MS,
      budgetMs: e.PORTICO_CHAT_BUDGET_MS,
      maxAttempts: e.PORTICO_CHAT_MAX_ATTEMPTS,
      retries: e.PORTICO_CHAT_RETRIES,
      retryBaseMs: e.PORTICO_CHAT_RETRY_BASE_MS,
      retryMaxMs: e.PORTICO_CHAT_RETRY_MAX_MS,
      streamFloorBytesPerSecond: e.PORTICO_STREAM_MIN_BYTES_PER_SECOND,
      streamProbeMs: e.PORTICO_STREAM_PROBE_MS,
      maxConcurrentPerKey: e.PORTICO_CHAT_MAX_CONCURRENT_PER_KEY,
      spendReservationTtlMs: e.PORTICO_SPEND_RESERVATION_TTL_MS,
      cooldownBaseMs: e.PORTICO_COOLDOWN_BASE_MS,
      cooldownMaxMs: e.PORTICO_COOLDOWN_MAX_MS,
      credentialOrder: e.PORTICO_CREDENTIAL_ORDER,
      stickyTtlMs: e.PORTICO_STICKY_TTL_MS,
      stickyMaxSessions: e.PORTICO_STICKY_MAX_SESSIONS,
    },
    providers: providerEndpoints(env),
    byok: {
      masterKey: e.PORTICO_MASTER_KEY,
      masterKeyFile: e.PORTICO_MASTER_KEY_FILE,
    },
    catalogFile: e.PORTICO_CATALOG_FILE ? resolve(e.PORTICO_CATALOG_FILE) : undefined,
    catalogRefreshMs: e.PORTICO_CATALOG_REFRESH_MS,
    plugins: {
      moderation: e.PORTICO_MODERATION_BASE_URL
        ? {
            baseUrl: httpUrl("PORTICO_MODERATION_BASE_URL", e.PORTICO_MODERATION_BASE_URL),
            apiKey: e.PORTICO_MODERATION_API_KEY || undefined,
            model: e.PORTICO_MODERATION_MODEL || "omni-moderation-latest",
            timeoutMs: e.PORTICO_MODERATION_TIMEOUT_MS,
          }
        : undefined,
    },
    tracing: tracingSettings(e),
    serverTools: {
      maxTurns: e.PORTICO_SERVER_TOOLS_MAX_TURNS,
      webFetch: {
        allowAddresses: addressList("PORTICO_WEB_FETCH_ALLOW_ADDRESSES", e.PORTICO_WEB_FETCH_ALLOW_ADDRESSES),
        maxBytes: e.PORTICO_WEB_FETCH_MAX_BYTES,
        timeoutMs: e.PORTICO_WEB_FETCH_TIMEOUT_MS,
      },
      search: {
        engine: e.PORTICO_WEB_SEARCH_ENGINE,
        searxngUrl: e.PORTICO_SEARXNG_URL ? httpUrl("PORTICO_SEARXNG_URL", e.PORTICO_SEARXNG_URL) : undefined,
        braveUrl: httpUrl("PORTICO_BRAVE_SEARCH_URL", e.PORTICO_BRAVE_SEARCH_URL ?? "https://api.search.brave.com"),
        braveApiKey: e.PORTICO_BRAVE_SEARCH_API_KEY,
        timeoutMs: e.PORTICO_WEB_SEARCH_TIMEOUT_MS,
      },
    },
  };
}

/** A comma-separated list of IP addresses and CIDR ranges (checked with ipaddr.js). */
function addressList(name: string, raw: string | undefined): string[] {
  const out: string[] = [];
  for (const entry of (raw ?? "").split(",")) {
    const item = entry.trim();
    if (item === "") continue;
    const ok = item.includes("/") ? ipaddr.isValidCIDR(item) : ipaddr.isValid(item);
    if (!ok) throw new ConfigError(`${name} must be a comma-separated list of IP addresses and CIDR ranges (e.g. 127.0.0.1,10.0.0.0/8); "${item}" is neither`);
    out.push(item);
  }
  return out;
}
