/**
 * Authentication in the core: one Connect interceptor resolves the API key of every call (gRPC,
 * Connect or in-memory from the gateway) into a Caller kept in context values, so every caller
 * meets the same checks. Handlers read it with callerOf(ctx).
 */
import { Code, ConnectError, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { bearerToken, digestsEqual, hashSecret } from "./identity/keys.js";
import { CREATOR_DEPARTED, MANAGEMENT_REQUIRED, Reason, invalidArgument, permissionDenied, serviceError, unauthenticated } from "./errors.js";
import { isRunToken, type RunCredentialCheck } from "./interns/run-credentials.js";
import { PULL, type Pullable, type Pulled } from "../lib/pull.js";

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
  /**
   * Set when the call came with an intern run's credential (docs/interns.md, "Model calls through Portico"):
   * the caller is the API key that started the run; the request uses `model` in place of the one it names and
   * its generation is linked to the intern, run and session.
   */
  run?: CallerRun;
}

/** The intern run a call made with a run credential belongs to. */
export interface CallerRun {
  internId: string;
  runId: string;
  /** The run's caller-visible session_id. */
  sessionKey: string;
  /** The intern's model (`<provider>/<model>` or `@preset/<slug>`). */
  model: string;
}

/**
 * The procedures that accept an intern run credential: the model endpoints (docs/interns.md, "Model calls
 * through Portico"). Every other procedure refuses it (403). A new model endpoint opts in with one line:
 * `acceptRunCredential("<package.Service>/<Method>")` where its handler is registered.
 */
const RUN_CREDENTIAL_PROCEDURES = new Set<string>([
  "portico.chat.v1.ChatService/CreateChatCompletion",
  "portico.chat.v1.ChatService/StreamChatCompletion",
  "portico.chat.v1.ChatService/CreateMessage",
  "portico.chat.v1.ChatService/StreamMessage",
  "portico.chat.v1.ChatService/CountMessageTokens",
  "portico.chat.v1.ChatService/CreateResponse",
  "portico.chat.v1.ChatService/StreamResponse",
  "portico.chat.v1.ChatService/GenerateContent",
  "portico.chat.v1.ChatService/StreamGenerateContent",
  "portico.chat.v1.ChatService/CountGeminiTokens",
  "portico.embeddings.v1.EmbeddingsService/CreateEmbeddings",
]);

/** Lets the procedure `<package.Service>/<Method>` (a model endpoint) accept intern run credentials. */
export function acceptRunCredential(procedure: string): void {
  RUN_CREDENTIAL_PROCEDURES.add(procedure);
}

/** Whether `<package.Service>/<Method>` accepts intern run credentials. */
export function acceptsRunCredential(procedure: string): boolean {
  return RUN_CREDENTIAL_PROCEDURES.has(procedure);
}

/** Checks a presented intern run credential (run-credentials.ts). */
export type RunCredentialLookup = (token: string) => Promise<RunCredentialCheck>;

const RUN_CREDENTIAL_REFUSED: Record<Exclude<RunCredentialCheck, { ok: true }>["why"], string> = {
  unknown: "Invalid intern run credential",
  revoked: "This intern run credential was revoked: its run has ended or was cancelled",
  expired: "This intern run credential has expired",
};

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
  /** Checks intern run credentials (`prt-v1-…`); absent: they are refused like unknown keys. */
  runCredentials?: RunCredentialLookup;
}

export function createAuthInterceptor(opts: AuthInterceptorOptions): Interceptor {
  return (next) => async (req) => {
    if (opts.publicServices.has(req.service.typeName)) return next(req);
    const token = bearerToken(req.header.get("authorization"));
    if (!token) throw unauthenticated("Missing Authentication header");
    let run: CallerRun | undefined;
    let hash: string;
    if (isRunToken(token)) {
      // An intern run's credential: the model endpoints only, as the key that started the run.
      const procedure = `${req.service.typeName}/${req.method.name}`;
      if (!acceptsRunCredential(procedure)) {
        throw permissionDenied("An intern run credential can call the model endpoints only (chat completions, messages, responses, embeddings, the Gemini dialect)");
      }
      const check = opts.runCredentials ? await opts.runCredentials(token) : ({ ok: false, why: "unknown" } as const);
      if (!check.ok) throw unauthenticated(RUN_CREDENTIAL_REFUSED[check.why]);
      const { scope } = check;
      run = { internId: scope.internId, runId: scope.runId, sessionKey: scope.sessionKey, model: scope.model };
      hash = scope.keyHash;
    } else {
      hash = hashSecret(token);
    }
    const whose = run ? "The API key that started the intern run" : "API key";
    const record = await opts.lookup(hash);
    if (!record || !digestsEqual(record.keyHash, hash)) throw unauthenticated(run ? `${whose} no longer exists` : "Invalid or missing API key");
    if (record.revoked) throw unauthenticated(`${whose} has been revoked`);
    if (record.disabled) throw unauthenticated(`${whose} is disabled`);
    if (record.workspaceDeleted) throw unauthenticated(`${whose}'s workspace has been deleted`);
    if (record.expiresAtMs != null && Date.now() >= record.expiresAtMs) throw unauthenticated(`${whose} has expired`);
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
    if (run) caller.run = run;
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
      // The source's `[PULL]`, read once (src/lib/pull.ts).
      const pullIt = (it as Partial<Pullable<T>>)[PULL];
      const mapped = (err: unknown) => Promise.reject(map(err));
      return {
        next: () => it.next().catch(mapped),
        // A result at hand passed on as it is (src/lib/pull.ts); an error mapped as `next()` maps it.
        [PULL]: (): Pulled<T> => {
          let r: Pulled<T>;
          try {
            r = pullIt !== undefined ? pullIt.call(it) : it.next();
          } catch (err) {
            throw map(err);
          }
          return r instanceof Promise ? r.catch(mapped) : r;
        },
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
