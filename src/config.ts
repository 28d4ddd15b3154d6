/**
 * The one typed configuration module. Every environment variable Portico reads is parsed here
 * (the composition root passes the result down); no other module reads process.env.
 */
import { resolve } from "node:path";

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
}

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
  /** Whether `portico serve` attaches the embedded intern host with the built-in agent (PORTICO_EMBEDDED_HOST). */
  embeddedHost: boolean;
  /** Identifier of this process in logs and routing records (PORTICO_INSTANCE_ID). */
  instanceId: string;
  interns: InternChatConfig;
  /** Provider base URLs for chat completions (see docs/providers.md). */
  providers: ProviderEndpointConfig;
  byok: ByokConfig;
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
  const extraOpenAICompatible: Record<string, string> = {};
  const list = str(env, "PORTICO_OPENAI_COMPATIBLE_PROVIDERS");
  for (const entry of list ? list.split(",") : []) {
    const at = entry.indexOf("=");
    const slug = entry.slice(0, at).trim();
    if (at <= 0 || !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(slug)) {
      throw new ConfigError("PORTICO_OPENAI_COMPATIBLE_PROVIDERS must be a comma-separated list of slug=base-url (lowercase slugs)");
    }
    extraOpenAICompatible[slug] = httpUrl("PORTICO_OPENAI_COMPATIBLE_PROVIDERS", entry.slice(at + 1).trim());
  }
  return { baseUrls, extraOpenAICompatible };
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}`);
  }
  return value;
}

function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (/^(1|true|yes|on)$/i.test(raw)) return true;
  if (/^(0|false|no|off)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false`);
}

function str(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw === "" ? undefined : raw;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const host = str(env, "HOST") ?? "127.0.0.1";
  const grpcPort = int(env, "PORTICO_GRPC_PORT", 50051, 0, 65535);
  const brand = str(env, "PORTICO_BRAND") ?? "service";
  if (!/^[a-z][a-z0-9-]{0,31}$/.test(brand)) throw new ConfigError("PORTICO_BRAND must be a short lowercase word");
  const certFile = str(env, "PORTICO_GRPC_TLS_CERT_FILE");
  const keyFile = str(env, "PORTICO_GRPC_TLS_KEY_FILE");
  if (Boolean(certFile) !== Boolean(keyFile)) throw new ConfigError("PORTICO_GRPC_TLS_CERT_FILE and PORTICO_GRPC_TLS_KEY_FILE must be set together");
  return {
    grpcTls: certFile && keyFile ? { certFile: resolve(certFile), keyFile: resolve(keyFile) } : undefined,
    dataDir: resolve(str(env, "PORTICO_DATA_DIR") ?? "./data"),
    databaseUrl: str(env, "DATABASE_URL"),
    redisUrl: str(env, "REDIS_URL"),
    host,
    httpPort: int(env, "PORT", 8080, 0, 65535),
    grpcPort,
    coreUrl: str(env, "PORTICO_CORE_URL") ?? `http://127.0.0.1:${grpcPort}`,
    logLevel: str(env, "PORTICO_LOG_LEVEL") ?? "info",
    shutdownTimeoutMs: int(env, "PORTICO_SHUTDOWN_TIMEOUT_MS", 10_000, 100, 600_000),
    production: bool(env, "PORTICO_PRODUCTION", false),
    bodyLimitBytes: int(env, "PORTICO_BODY_LIMIT_BYTES", 1_048_576, 1024),
    requestTimeoutMs: int(env, "PORTICO_REQUEST_TIMEOUT_MS", 30_000, 100, 3_600_000),
    brand,
    embeddedHost: bool(env, "PORTICO_EMBEDDED_HOST", true),
    instanceId: str(env, "PORTICO_INSTANCE_ID") ?? `core-${process.pid}`,
    interns: {
      interactionDeadlineMs: int(env, "PORTICO_INTERACTION_DEADLINE_MS", 300_000, 100),
      heartbeatIntervalMs: int(env, "PORTICO_HEARTBEAT_INTERVAL_MS", 30_000, 50),
      rateLimitTurns: int(env, "PORTICO_INTERN_RATE_LIMIT", 60, 1),
      rateLimitWindowSeconds: int(env, "PORTICO_INTERN_RATE_WINDOW_S", 60, 1),
      startTimeoutMs: int(env, "PORTICO_INTERN_START_TIMEOUT_MS", 30_000, 100),
      maxPromptChars: int(env, "PORTICO_INTERN_MAX_PROMPT_CHARS", 32_000, 1),
      linkPingIntervalMs: int(env, "PORTICO_LINK_PING_INTERVAL_MS", 1_000, 50),
      linkLivenessTimeoutMs: int(env, "PORTICO_LINK_LIVENESS_TIMEOUT_MS", 4_000, 200),
    },
    providers: providerEndpoints(env),
    byok: {
      masterKey: str(env, "PORTICO_MASTER_KEY"),
      masterKeyFile: str(env, "PORTICO_MASTER_KEY_FILE"),
    },
  };
}
