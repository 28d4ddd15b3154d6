/**
 * JSON logging with redaction. Authorization headers, API keys, provider keys and host tokens are
 * censored wherever they appear under the listed paths, and a last-resort pattern scrub removes
 * anything shaped like a Portico key from messages.
 */
import { pino, type Logger, type LoggerOptions } from "pino";

export type { Logger } from "pino";

/**
 * What is censored, as pino's `redact` paths would say it: `authorization`, `key`, `token`, `apiKey`, `api_key`,
 * `management_key`, `host_token`, `masterKey` and `body` at the top of a line and one level below (`*.key`);
 * `authorization`, `x-api-key` and `x-goog-api-key` under `headers`, `req.headers` and `request.headers`. Applied by
 * {@link redact} (pino's own `redact` option ran a redactor over every value of every line, nine wildcard paths
 * each: ≈ 5 µs a line; bench/README.md, "Chat hot path: the per-request path").
 */
const REDACTED_NAMES = ["authorization", "key", "token", "apiKey", "api_key", "management_key", "host_token", "masterKey", "body"] as const;
const REDACTED_HEADERS = ["authorization", "x-api-key", "x-goog-api-key"] as const;
const HEADER_PARENTS = ["req", "request"] as const;
const CENSOR = "[REDACTED]";
const REDACTED = new Set<string>(REDACTED_NAMES);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;

/** `v` with the listed names censored (a copy when one is present; `v` itself otherwise). */
function censored(v: Record<string, unknown>, names: readonly string[]): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const name of names) {
    if (name in v) (out ??= { ...v })[name] = CENSOR;
  }
  return out ?? v;
}

/** The headers object `v.headers` censored, in a copy of `v` when needed. */
function withHeadersCensored(v: Record<string, unknown>): Record<string, unknown> {
  const headers = v.headers;
  if (!isObject(headers)) return v;
  const clean = censored(headers, REDACTED_HEADERS);
  return clean === headers ? v : { ...v, headers: clean };
}

/**
 * A log line's object (or a child logger's bindings) with the secrets' places censored. Never changes the
 * caller's object: what it changes is copied (the copies are shallow, down to the censored value).
 */
export function redact(obj: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const k in obj) {
    if (!Object.prototype.hasOwnProperty.call(obj, k)) continue;
    const v = obj[k];
    if (REDACTED.has(k)) {
      if (v !== undefined) (out ??= { ...obj })[k] = CENSOR;
      continue;
    }
    // An error under `err` is reduced by the `err` serializer to its type, scrubbed message, code and stack.
    if (!isObject(v) || (k === "err" && v instanceof Error)) continue;
    let clean = censored(v, REDACTED_NAMES);
    if (k === "headers") clean = censored(clean, REDACTED_HEADERS);
    else if ((HEADER_PARENTS as readonly string[]).includes(k)) clean = withHeadersCensored(clean);
    if (clean !== v) (out ??= { ...obj })[k] = clean;
  }
  return out ?? obj;
}

/** Matches Portico API keys, host tokens and intern run credentials (pk-…, pht-…, prt-…) so they never reach a log line. */
const KEY_PATTERN = /\b(pk|pht|prt)-v1-[0-9a-f]{16,}\b/g;

export function scrubSecrets(text: string): string {
  return text.replace(KEY_PATTERN, "$1-v1-[REDACTED]");
}

export interface CreateLoggerOptions {
  level?: string;
  name?: string;
  /** Where lines go; default stdout. Tests pass a stream to capture output. */
  destination?: { write(line: string): unknown };
}

export function createLogger(opts: CreateLoggerOptions = {}): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? "info",
    // Redaction of the line's object and of child loggers' bindings (see `redact`).
    formatters: { log: redact, bindings: redact },
    hooks: {
      logMethod(args, method) {
        // Key-shaped text scrubbed from strings; objects interpolated into the message (`%o`, `%j`) redacted.
        let scrubbed: unknown[] | undefined;
        let message = false;
        for (let i = 0; i < args.length; i++) {
          const a: unknown = args[i];
          const clean = typeof a === "string" ? (a.includes("-v1-") ? scrubSecrets(a) : a) : message && isObject(a) ? redact(a) : a;
          if (typeof a === "string") message = true;
          if (clean !== a) (scrubbed ??= [...args])[i] = clean;
        }
        method.apply(this, (scrubbed ?? args) as typeof args);
      },
    },
    serializers: {
      err: (err: unknown) => {
        const e = err as { name?: string; message?: string; code?: unknown; stack?: string };
        return {
          type: e?.name,
          message: scrubSecrets(String(e?.message ?? err)),
          code: e?.code,
          stack: e?.stack ? scrubSecrets(e.stack) : undefined,
        };
      },
    },
  };
  if (opts.name) options.name = opts.name;
  const logger = opts.destination ? pino(options, opts.destination as pino.DestinationStream) : pino(options);
  // pino formats only the root's bindings: a child's are redacted here. Children are made from their parent
  // (`Object.create`), so every descendant inherits this `child`.
  const child = logger.child as unknown as (this: unknown, bindings: pino.Bindings, childOptions?: unknown) => Logger;
  logger.child = function (this: unknown, bindings: pino.Bindings, childOptions?: unknown) {
    return child.call(this, redact(bindings), childOptions);
  } as unknown as typeof logger.child;
  return logger;
}
