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

/** How an agent reaches Portico's model endpoints: the host's model relay, as one agent process sees it. */
export interface ModelAccess {
  /** Base URL standing for Portico's `<gateway>/api` (the relay's `http://127.0.0.1:<port>`). */
  baseUrl: string;
  /** The credential the agent sends there (the relay's host-local secret for this process). */
  token: string;
  /** The intern's model id from the run's gateway ("" when none). */
  model: string;
}

/** Agent families the profile's `modelGateway` knows how to point at Portico. */
export const MODEL_GATEWAY_FAMILIES = ["anthropic", "openai-responses", "openai-chat", "gemini", "opencode"] as const;
export type ModelGatewayFamily = (typeof MODEL_GATEWAY_FAMILIES)[number];

/** The name of the variable codex-acp reads the credential from (`env_key` of its model provider). */
export const CODEX_TOKEN_ENV = "PORTICO_MODEL_TOKEN";

const PLACEHOLDER = /\$\{(PORTICO_MODEL_BASE_URL|PORTICO_MODEL_TOKEN|PORTICO_MODEL)\}/g;

/** Replaces `${PORTICO_MODEL_BASE_URL}`, `${PORTICO_MODEL_TOKEN}` and `${PORTICO_MODEL}` (empty without access). */
export function fillModelPlaceholders(value: string, access: ModelAccess | undefined): string {
  return value.replace(PLACEHOLDER, (_, name: string) =>
    !access ? "" : name === "PORTICO_MODEL_BASE_URL" ? access.baseUrl : name === "PORTICO_MODEL_TOKEN" ? access.token : access.model,
  );
}

/** True when the profile points its agent at Portico by itself (a `modelGateway` family or a placeholder). */
export function profileUsesModelTemplating(profile: AgentProfile): boolean {
  if (profile.modelGateway) return true;
  const values = [...(profile.args ?? []), ...Object.values(profile.env ?? {})];
  return values.some((v) => new RegExp(PLACEHOLDER.source).test(v));
}

/**
 * Variables and extra arguments that point one agent family at Portico (through `access`):
 * - anthropic (claude-code-acp, claude-agent-acp): `ANTHROPIC_BASE_URL=<base>` (the agent appends
 *   `/v1/messages`), `ANTHROPIC_API_KEY=<token>`, `ANTHROPIC_MODEL=<model>`;
 * - openai-responses (codex-acp): a `model_providers.portico` entry (`base_url=<base>/v1`,
 *   `wire_api="responses"`, `env_key="PORTICO_MODEL_TOKEN"`) selected with `model_provider`, plus `model`, and
 *   `web_search="disabled"` (Portico's Responses dialect refuses OpenAI's hosted web_search tool);
 * - openai-chat (OpenAI-compatible agents): `OPENAI_BASE_URL=<base>/v1`, `OPENAI_API_KEY=<token>`;
 * - gemini (gemini-cli without ACP gateway auth): `GOOGLE_GEMINI_BASE_URL=<base>`, `GEMINI_API_KEY=<token>`;
 * - opencode: a `portico` provider (`@ai-sdk/openai-compatible`, chat completions at `<base>/v1`) and
 *   `model: "portico/<model>"`, merged into the profile's own `OPENCODE_CONFIG_CONTENT`.
 */
export function modelGatewayLaunch(
  family: ModelGatewayFamily,
  access: ModelAccess,
  profileEnv: Record<string, string>,
): { env: Record<string, string>; args: string[] } {
  const { baseUrl: base, token, model } = access;
  switch (family) {
    case "anthropic":
      return { env: { ANTHROPIC_BASE_URL: base, ANTHROPIC_API_KEY: token, ...(model ? { ANTHROPIC_MODEL: model } : {}) }, args: [] };
    case "openai-responses": {
      const provider = `model_providers.portico={name="Portico",base_url=${JSON.stringify(`${base}/v1`)},wire_api="responses",env_key="${CODEX_TOKEN_ENV}"}`;
      // Codex offers OpenAI's hosted `web_search` tool by default; Portico's Responses dialect refuses hosted tools
      // (docs/dialects.md), so it is turned off (appended after the profile's own args).
      const args = ["-c", 'model_provider="portico"', "-c", provider, "-c", 'web_search="disabled"'];
      if (model) args.push("-c", `model=${JSON.stringify(model)}`);
      return { env: { [CODEX_TOKEN_ENV]: token }, args };
    }
    case "openai-chat":
      return { env: { OPENAI_BASE_URL: `${base}/v1`, OPENAI_API_KEY: token }, args: [] };
    case "gemini":
      return { env: { GOOGLE_GEMINI_BASE_URL: base, GEMINI_API_KEY: token }, args: [] };
    case "opencode": {
      let config: Record<string, unknown> = {};
      const own = profileEnv.OPENCODE_CONFIG_CONTENT;
      if (own) {
        try {
          const parsed: unknown = JSON.parse(own);
          if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) config = parsed as Record<string, unknown>;
        } catch {
          // not JSON: replaced by ours
        }
      }
      const providers = (config.provider && typeof config.provider === "object" ? config.provider : {}) as Record<string, unknown>;
      config = {
        ...config,
        provider: {
          ...providers,
          portico: {
            npm: "@ai-sdk/openai-compatible",
            name: "Portico",
            options: { baseURL: `${base}/v1`, apiKey: token },
            models: model ? { [model]: { name: model } } : {},
          },
        },
        ...(model ? { model: `portico/${model}`, small_model: `portico/${model}` } : {}),
      };
      return { env: { OPENCODE_CONFIG_CONTENT: JSON.stringify(config) }, args: [] };
    }
  }
}

/**
 * How the agent process starts: the profile's args and environment with the model gateway applied
 * (`modelGateway` family first, then the profile's own env and args with placeholders filled; the
 * profile's explicit env wins over the family's, except `OPENCODE_CONFIG_CONTENT`, which is merged).
 * Without `access` (no gateway for this agent) placeholders become empty and no family applies.
 */
export function agentLaunch(
  profile: AgentProfile,
  homeDir: string,
  cwd: string,
  access: ModelAccess | undefined,
  source: NodeJS.ProcessEnv = process.env,
): { env: Record<string, string>; args: string[] } {
  const env = agentEnvironment({ ...profile, env: {} }, homeDir, cwd, source);
  const profileEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(profile.env ?? {})) profileEnv[k] = fillModelPlaceholders(v, access);
  const args = (profile.args ?? []).map((a) => fillModelPlaceholders(a, access));
  if (profile.modelGateway && access) {
    const fam = modelGatewayLaunch(profile.modelGateway, access, profileEnv);
    Object.assign(env, fam.env);
    for (const [k, v] of Object.entries(profileEnv)) if (!(k in fam.env && k === "OPENCODE_CONFIG_CONTENT")) env[k] = v;
    return { env, args: [...args, ...fam.args] };
  }
  Object.assign(env, profileEnv);
  return { env, args };
}
