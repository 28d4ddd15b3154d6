/**
 * JSON logging with redaction. Authorization headers, API keys, provider keys and host tokens are
 * censored wherever they appear under the listed paths, and a last-resort pattern scrub removes
 * anything shaped like a Portico key from messages.
 */
import { pino, type Logger, type LoggerOptions } from "pino";

export type { Logger } from "pino";

const REDACT_PATHS = [
  "authorization",
  "*.authorization",
  "headers.authorization",
  "req.headers.authorization",
  'req.headers["x-api-key"]',
  'req.headers["x-goog-api-key"]',
  'headers["x-api-key"]',
  'headers["x-goog-api-key"]',
  "request.headers.authorization",
  "key",
  "*.key",
  "token",
  "*.token",
  "apiKey",
  "*.apiKey",
  "api_key",
  "*.api_key",
  "management_key",
  "*.management_key",
  "host_token",
  "*.host_token",
  "masterKey",
  "*.masterKey",
  "body",
  "*.body",
];

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
    redact: { paths: REDACT_PATHS, censor: "[REDACTED]" },
    hooks: {
      logMethod(args, method) {
        const scrubbed = args.map((a) => (typeof a === "string" ? scrubSecrets(a) : a)) as typeof args;
        method.apply(this, scrubbed);
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
  return opts.destination ? pino(options, opts.destination as pino.DestinationStream) : pino(options);
}
