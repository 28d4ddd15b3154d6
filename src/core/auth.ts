/**
 * Authentication in the core: one Connect interceptor resolves the API key of every call (gRPC,
 * Connect or in-memory from the gateway) into a Caller kept in context values, so every caller
 * meets the same checks. Handlers read it with callerOf(ctx).
 */
import { Code, ConnectError, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { bearerToken, digestsEqual, hashSecret } from "./identity/keys.js";
import { CREATOR_DEPARTED, MANAGEMENT_REQUIRED, Reason, invalidArgument, permissionDenied, serviceError, unauthenticated } from "./errors.js";

export interface Caller {
  keyId: string;
  keyHash: string;
  keyLabel: string;
  organizationId: string;
  workspaceId: string;
  userId: string;
  isManagement: boolean;
  internsProgramme: boolean;
  /** The key's and its workspace's spend and rate limits (docs/limits.md); absent: none. */
  limits?: CallerLimits;
  /** The workspace's response cache time to live for requests that do not set `cache` (docs/operations.md); absent/null: off. */
  responseCacheTtlSeconds?: number | null;
  /** The workspace's content logging retention in days (docs/operations.md, "Content logging"); absent/null: off. */
  contentLogRetentionDays?: number | null;
}

/** What bounds a caller's chat completions (docs/limits.md). */
export interface CallerLimits {
  /** The key has a spend limit (its counter is `key:<key id>`). */
  keySpend: boolean;
  /** The workspace has a budget (its counter is `ws:<workspace id>`). */
  workspaceSpend: boolean;
  keyRpm: number | null;
  keyTpm: number | null;
  workspaceRpm: number | null;
  workspaceTpm: number | null;
}

/** What the key store returns for a hash; the interceptor decides what it means. */
export interface KeyRecord extends Caller {
  disabled: boolean;
  revoked: boolean;
  creatorIsMember: boolean;
  /** The key's workspace was deleted: the key is refused like a revoked one. */
  workspaceDeleted: boolean;
  /** When the key expires (Unix ms); null: never. Checked on every request, cached entry or not. */
  expiresAtMs?: number | null;
}

export type KeyLookup = (keyHash: string) => Promise<KeyRecord | null>;

export const kCaller = createContextKey<Caller | undefined>(undefined, { description: "authenticated caller" });

export function callerOf(ctx: HandlerContext): Caller {
  const caller = ctx.values.get(kCaller);
  if (!caller) throw unauthenticated("Missing Authentication header");
  return caller;
}

export function requireManagement(caller: Caller): void {
  if (!caller.isManagement) throw permissionDenied(MANAGEMENT_REQUIRED);
}

export interface AuthInterceptorOptions {
  lookup: KeyLookup;
  /** Fully-qualified service names that authenticate on their own (health, intern host links). */
  publicServices: ReadonlySet<string>;
}

export function createAuthInterceptor(opts: AuthInterceptorOptions): Interceptor {
  return (next) => async (req) => {
    if (opts.publicServices.has(req.service.typeName)) return next(req);
    const token = bearerToken(req.header.get("authorization"));
    if (!token) throw unauthenticated("Missing Authentication header");
    const hash = hashSecret(token);
    const record = await opts.lookup(hash);
    if (!record || !digestsEqual(record.keyHash, hash)) throw unauthenticated("Invalid or missing API key");
    if (record.revoked) throw unauthenticated("API key has been revoked");
    if (record.disabled) throw unauthenticated("API key is disabled");
    if (record.workspaceDeleted) throw unauthenticated("API key's workspace has been deleted");
    if (record.expiresAtMs != null && Date.now() >= record.expiresAtMs) throw unauthenticated("API key has expired");
    if (!record.creatorIsMember) throw permissionDenied(CREATOR_DEPARTED);
    const caller: Caller = {
      keyId: record.keyId,
      keyHash: record.keyHash,
      keyLabel: record.keyLabel,
      organizationId: record.organizationId,
      workspaceId: record.workspaceId,
      userId: record.userId,
      isManagement: record.isManagement,
      internsProgramme: record.internsProgramme,
    };
    if (record.limits) caller.limits = record.limits;
    if (record.responseCacheTtlSeconds) caller.responseCacheTtlSeconds = record.responseCacheTtlSeconds;
    if (record.contentLogRetentionDays) caller.contentLogRetentionDays = record.contentLogRetentionDays;
    req.contextValues.set(kCaller, caller);
    return next(req);
  };
}

/** Turns unexpected exceptions into a bare Internal error so no message or stack leaves the core. */
export function createErrorBoundaryInterceptor(
  onUnexpected: (err: unknown, procedure: string, requestId: string | null) => void,
): Interceptor {
  return (next) => async (req) => {
    const report = (err: unknown, procedure: string) => onUnexpected(err, procedure, req.header.get("x-request-id"));
    try {
      const res = await next(req);
      if (!res.stream) return res;
      return { ...res, message: sanitizeErrors(res.message, (err) => sanitize(err, req.url, report)) };
    } catch (err) {
      throw sanitize(err, req.url, report);
    }
  };
}

/** Prisma's "transaction could not start in time" (P2028) and "timed out fetching a connection" (P2024). */
function isDatabaseBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "P2028" || code === "P2024";
}

/**
 * `source` with its errors passed through `map`: a hand-written iterator, not an async generator around
 * `yield*` (each generator layer costs several promise turns per message of a stream).
 */
function sanitizeErrors<T>(source: AsyncIterable<T>, map: (err: unknown) => unknown): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      return {
        next: () => it.next().catch((err: unknown) => Promise.reject(map(err))),
        return: (value?: unknown) => (it.return ? it.return(value).catch((err: unknown) => Promise.reject(map(err))) : Promise.resolve({ done: true, value: undefined as never })),
        throw: (err?: unknown) => (it.throw ? it.throw(err).catch((e: unknown) => Promise.reject(map(e))) : Promise.reject(err)),
      };
    },
  };
}

/**
 * The database cannot be reached at all (down, restarting, or it ended our connections): Prisma's P1001/P1002/P1017,
 * or the driver's own words when they arrive inside another code (a raw query's P2010, the adapter's error).
 */
const UNREACHABLE_CODES = new Set(["P1001", "P1002", "P1017"]);
const UNREACHABLE_TEXT =
  /Can't reach database server|Server has closed the connection|the database system is (?:starting up|shutting down|in recovery mode)|terminating connection due to administrator command|Connection terminated|connection error and is not queryable|ECONNREFUSED|ECONNRESET/;
function isDatabaseUnreachable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string" && UNREACHABLE_CODES.has(code)) return true;
  if (!(err instanceof Error) || err instanceof ConnectError) return false;
  return UNREACHABLE_TEXT.test(err.message) || UNREACHABLE_TEXT.test(String((err as { cause?: { message?: unknown } }).cause?.message ?? ""));
}

function sanitize(err: unknown, procedure: string, onUnexpected: (err: unknown, procedure: string) => void): unknown {
  // A request message that is not valid protobuf (connect-es says Internal) is the caller's fault.
  if (err instanceof ConnectError && err.code === Code.Internal && err.rawMessage.startsWith("parse binary:")) {
    return invalidArgument("request", "the request message is not valid protobuf");
  }
  if (err instanceof ConnectError && err.code !== Code.Internal && err.code !== Code.Unknown) return err;
  // The caller went away (its signal aborted the handler's work): not a fault, nothing to report.
  if (err instanceof Error && err.name === "AbortError") return new ConnectError("the caller went away", Code.Canceled);
  if (err instanceof ConnectError && err.rawMessage === "Internal Server Error") return err;
  // The database could not hand out a connection or start a transaction in time: overload, not a fault of
  // the request; the caller is told to come back shortly (503, Retry-After) instead of getting a 500.
  if (isDatabaseBusy(err)) {
    return serviceError(Reason.CORE_UNAVAILABLE, "The service is busy; retry shortly", { retryAfterSeconds: 1 });
  }
  // The database is away (restarting, down): nothing was done, the caller may retry; 503, not a 500.
  if (isDatabaseUnreachable(err)) {
    return serviceError(Reason.CORE_UNAVAILABLE, "The service cannot reach its database; retry shortly", { retryAfterSeconds: 1 });
  }
  onUnexpected(err, procedure);
  return new ConnectError("Internal Server Error", Code.Internal);
}
