/**
 * An in-process Transport that calls the core's handlers directly: messages cross as objects, not
 * protobuf bytes. The core's interceptors (metrics, error boundary, authentication) run exactly as for
 * network calls; the gateway in `portico serve` uses it, and split deployments use gRPC instead.
 * Unary and server-streaming methods are supported (the gateway uses nothing else); other kinds
 * answer Unimplemented. A handler's signal aborts when the caller's signal does or the call's timeout
 * passes, and for a stream also when it ends or its reader stops; a unary call that ends does not abort
 * it (nothing listens then: the work it stood for is done). The interceptor chain is composed once, and a unary
 * call's response headers and trailers are made only when read: in-process unary call 18–22 → 6–7.5 µs
 * (bench/README.md, "cuts of the hotpath session").
 */
import { create, isMessage, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  createServiceImplSpec,
  type HandlerContext,
  type ConnectRouter,
  type ContextValues,
  type Interceptor,
  type MethodImplSpec,
  type StreamRequest,
  type StreamResponse,
  type Transport,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { LightAbortController } from "../lib/light-abort.js";
import { OneValue, oneValue } from "../lib/one-value.js";
import { PULL, type Pullable, type Pulled } from "../lib/pull.js";

type AnyFn = (req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>;

/**
 * The abort reason of a stream whose reader stopped, built once: an Error (or the DOMException `abort()`
 * makes without a reason) captures a stack trace, which cost more than the rest of ending a call.
 */
const CLIENT_CLOSED = new ConnectError("the client closed the stream", Code.Canceled);

/** Collects the service implementations a `routes` function registers. */
function collectImplementations(routes: (router: ConnectRouter) => void): Map<string, MethodImplSpec> {
  const specs = new Map<string, MethodImplSpec>();
  const router = {
    handlers: [],
    service(service: DescService, impl: object) {
      const spec = createServiceImplSpec(service, impl);
      for (const m of Object.values(spec.methods)) specs.set(`${service.typeName}/${m.method.name}`, m);
      return router;
    },
    rpc() {
      throw new Error("direct transport: router.rpc is not supported; register services");
    },
  } as unknown as ConnectRouter;
  routes(router);
  return specs;
}

/**
 * `source` mapped by `fn`, calling `onEnd` once when it ends, fails or its reader stops (return/throw).
 * A hand-written iterator: every async-generator layer costs several promise turns per message.
 */
function mapMessages<T, U>(source: AsyncIterable<T>, fn: (value: T) => U, onEnd: () => void): AsyncIterable<U> {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      // The source's `[PULL]`, read once (src/lib/pull.ts).
      const pullIt = (it as Partial<Pullable<T>>)[PULL];
      let ended = false;
      const end = () => {
        if (!ended) {
          ended = true;
          onEnd();
        }
      };
      // `then` callbacks made once, not an async `next` (its own promise and an await per message).
      const mapped = (r: IteratorResult<T>): IteratorResult<U> => {
        if (r.done) {
          end();
          return { done: true, value: undefined };
        }
        try {
          const value = fn(r.value);
          // A message already (the chat handler's are): the source's result passed on, no object of this layer's.
          return value === (r.value as unknown) ? (r as unknown as IteratorResult<U>) : { done: false, value };
        } catch (err) {
          end();
          throw err;
        }
      };
      const failed = (err: unknown): never => {
        end();
        throw err;
      };
      return {
        next(): Promise<IteratorResult<U>> {
          if (ended) return Promise.resolve({ done: true, value: undefined });
          return it.next().then(mapped, failed);
        },
        // A result at hand mapped at once (src/lib/pull.ts): the in-process relay of a burst without a promise per message.
        [PULL](): Pulled<U> {
          if (ended) return { done: true, value: undefined };
          let r: Pulled<T>;
          try {
            r = pullIt !== undefined ? pullIt.call(it) : it.next();
          } catch (err) {
            return failed(err);
          }
          return r instanceof Promise ? r.then(mapped, failed) : mapped(r);
        },
        async return() {
          try {
            if (!ended) await it.return?.();
          } finally {
            end();
          }
          return { done: true, value: undefined };
        },
        async throw(err?: unknown) {
          try {
            if (!ended && it.throw) await it.throw(err);
          } finally {
            end();
          }
          throw err;
        },
      };
    },
  };
}

function toMessage<D extends DescMessage>(schema: D, value: unknown) {
  return isMessage(value, schema) ? value : create(schema, value as never);
}

/**
 * The call's one AbortController: aborts when the caller's signal does, when the timeout passes, and when the
 * call ends. The handler sees its signal directly (connect's createHandlerContext would link two more
 * controllers, a deadline and a linked one, each abort dispatching an event: most of a short call's cost).
 */
function linkSignal(signal: AbortSignal | undefined, timeoutMs: number | undefined): { ac: AbortController; end(reason: unknown): void; release(): void } {
  const ac = new LightAbortController();
  let onAbort: (() => void) | undefined;
  if (signal) {
    if (signal.aborted) ac.abort(signal.reason);
    else {
      onAbort = () => ac.abort(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
    }
  }
  let timer: NodeJS.Timeout | undefined;
  if (timeoutMs !== undefined && timeoutMs > 0 && !ac.signal.aborted) {
    timer = setTimeout(() => ac.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);
    timer.unref();
  }
  const release = () => {
    if (timer) clearTimeout(timer);
    if (onAbort) signal!.removeEventListener("abort", onAbort);
  };
  return {
    ac,
    release,
    /** Releases, then aborts the call's signal (a stream ended or its reader stopped). */
    end(reason) {
      release();
      if (!ac.signal.aborted) ac.abort(reason);
    },
  };
}

/**
 * The request headers of a call given as a plain record of strings (as the gateway gives them): a `Headers` over a
 * Map. The WHATWG `Headers` validates and normalises every name and value on the way in and on every `get` (the
 * gateway's values come from Node's HTTP parser, already valid): building one and the nine reads a chat request
 * makes cost 1.8 µs, this 0.1 (bench/README.md, "Chat hot path: the per-request path"). Names are case-insensitive,
 * values trimmed, iteration sorted by name, as with `Headers`.
 */
class RecordHeaders {
  private readonly map = new Map<string, string>();
  constructor(record: Record<string, string>) {
    for (const name of Object.keys(record)) this.append(name, record[name]!);
  }
  get(name: string): string | null {
    return this.map.get(name.toLowerCase()) ?? null;
  }
  has(name: string): boolean {
    return this.map.has(name.toLowerCase());
  }
  set(name: string, value: string): void {
    this.map.set(name.toLowerCase(), String(value).trim());
  }
  append(name: string, value: string): void {
    const key = name.toLowerCase();
    const v = String(value).trim();
    const had = this.map.get(key);
    this.map.set(key, had === undefined ? v : `${had}, ${v}`);
  }
  delete(name: string): void {
    this.map.delete(name.toLowerCase());
  }
  getSetCookie(): string[] {
    const v = this.map.get("set-cookie");
    return v === undefined ? [] : [v];
  }
  *entries(): IterableIterator<[string, string]> {
    for (const key of [...this.map.keys()].sort()) yield [key, this.map.get(key)!];
  }
  *keys(): IterableIterator<string> {
    for (const [k] of this.entries()) yield k;
  }
  *values(): IterableIterator<string> {
    for (const [, v] of this.entries()) yield v;
  }
  forEach(fn: (value: string, key: string, parent: Headers) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) fn.call(thisArg, v, k, this as unknown as Headers);
  }
  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }
  get [Symbol.toStringTag](): string {
    return "Headers";
  }
}

const isStringRecord = (h: unknown): h is Record<string, string> =>
  typeof h === "object" && h !== null && Object.getPrototypeOf(h) === Object.prototype;

/** The fields a unary and a streaming request share, as a network handler would present them. */
function requestCommon(method: DescMethod, header: ConstructorParameters<typeof Headers>[0], contextValues: ContextValues | undefined) {
  return {
    service: method.parent,
    method,
    requestMethod: "POST",
    url: urlOf(method),
    header: requestHeaderOf(header),
    contextValues: contextValues ?? createContextValues(),
  };
}

/** The request's URL path, as connect's handlers see it. */
const urlOf = (method: DescMethod): string => `/${method.parent.typeName}/${method.name}`;

/** The caller's headers as the request's: a plain record of strings read in place, anything else as `Headers`. */
const requestHeaderOf = (header: ConstructorParameters<typeof Headers>[0]): Headers =>
  isStringRecord(header) ? (new RecordHeaders(header) as unknown as Headers) : new Headers(header);

/**
 * The handler's context, as connect's createHandlerContext makes it for a network call, built directly: its
 * signal is the request's (already linked to the caller and the timeout), read only when the handler asks.
 */
function contextFor(method: DescMethod, req: UnaryRequest | StreamRequest, timeoutMs: number | undefined): HandlerContext {
  const deadline = timeoutMs !== undefined ? Date.now() + timeoutMs : undefined;
  return new CallContext(method, req, deadline === undefined ? noDeadline : () => deadline - Date.now());
}

const noDeadline = () => undefined;

/** The response headers and trailers of a call, made only when the handler or the caller reads them (two `Headers` a call otherwise). */
interface Lazy {
  readonly madeHeader: Headers | undefined;
  readonly madeTrailer: Headers | undefined;
}

class CallContext implements HandlerContext, Lazy {
  readonly service: DescService;
  readonly protocolName = "in-process";
  readonly requestMethod = "POST";
  readonly url: string;
  readonly requestHeader: Headers;
  readonly values: ContextValues;
  madeHeader: Headers | undefined;
  madeTrailer: Headers | undefined;
  constructor(
    readonly method: DescMethod,
    private readonly req: UnaryRequest | StreamRequest,
    readonly timeoutMs: () => number | undefined,
  ) {
    this.service = method.parent;
    this.url = req.url;
    this.requestHeader = req.header;
    this.values = req.contextValues;
  }
  get signal(): AbortSignal {
    return this.req.signal;
  }
  get responseHeader(): Headers {
    return (this.madeHeader ??= new Headers());
  }
  get responseTrailer(): Headers {
    return (this.madeTrailer ??= new Headers());
  }
}

/**
 * A unary response whose header and trailer are the context's, made on first read (getters on the prototype: no
 * per-object accessors). No interceptor spreads a unary response (a spread would not copy the getters).
 */
class Response {
  constructor(
    readonly stream: boolean,
    readonly service: DescService,
    readonly method: DescMethod,
    readonly message: unknown,
    private readonly ctx: HandlerContext,
  ) {}
  get header(): Headers {
    return this.ctx.responseHeader;
  }
  get trailer(): Headers {
    return this.ctx.responseTrailer;
  }
  /** The header and trailer if the handler or an interceptor made them (undefined: nothing was set). */
  get made(): Lazy {
    return this.ctx as CallContext;
  }
}

/**
 * A unary response's header and trailer without making them: undefined when nobody set either (reading `header` or
 * `trailer` of this transport's response makes a `Headers` object, which the gRPC fast path would only walk to find
 * nothing). Another transport's response gives its own.
 */
export function responseFields(res: UnaryResponse): { header: Headers | undefined; trailer: Headers | undefined } {
  if (res instanceof Response) {
    const made = res.made;
    return { header: made.madeHeader, trailer: made.madeTrailer };
  }
  return { header: res.header, trailer: res.trailer };
}

/** What the composed interceptor chain's last step needs of a call, carried on its request. */
const kCall = Symbol("direct-transport call");
interface CallInfo {
  spec: MethodImplSpec;
  timeoutMs: number | undefined;
}

export function createDirectTransport(routes: (router: ConnectRouter) => void, interceptors: Interceptor[]): Transport {
  const specs = collectImplementations(routes);

  // By the method's descriptor (the generated services' own objects, one per method): the name joined and hashed
  // on every call was ≈ 0.3 % of serve's CPU (bench/README.md, "serve's CPU per non-streamed request"). Another
  // descriptor of a known method is found by its name, as before, and kept too, up to a bound (descriptors are made
  // when code loads; one made per call would not grow the map past it).
  const byDescriptor = new Map<DescMethod, MethodImplSpec>();
  const lookup = (method: DescMethod): MethodImplSpec => {
    let spec = byDescriptor.get(method);
    if (spec) return spec;
    spec = specs.get(`${method.parent.typeName}/${method.name}`);
    if (!spec) throw new ConnectError(`${method.parent.typeName}/${method.name} is not implemented`, Code.Unimplemented);
    if (byDescriptor.size < 4096) byDescriptor.set(method, spec);
    return spec;
  };

  // The interceptors are composed once (not per call) around one last step that runs the call's handler.
  const chain: AnyFn = interceptors.reduceRight<AnyFn>((n, interceptor) => interceptor(n as never) as AnyFn, async (r) => {
    const { spec, timeoutMs } = (r as unknown as Record<symbol, CallInfo>)[kCall]!;
    const method = spec.method;
    const ctx = contextFor(method, r, timeoutMs);
    if (!r.stream) {
      const out = await (spec.impl as (m: unknown, c: unknown) => unknown)(r.message, ctx);
      return new Response(false, method.parent, method, toMessage(method.output, out), ctx) as unknown as UnaryResponse;
    }
    const request = (await r.message[Symbol.asyncIterator]().next()).value;
    const iterable = (spec.impl as (m: unknown, c: unknown) => AsyncIterable<unknown>)(request, ctx);
    // A plain object: interceptors spread a stream's response to wrap its messages (a spread copies no prototype getters).
    return { stream: true, service: method.parent, method, header: ctx.responseHeader, trailer: ctx.responseTrailer, message: iterable } as StreamResponse;
  });

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues?: ContextValues) {
      const spec = lookup(method);
      if (spec.kind !== "unary") throw new ConnectError("not a unary method", Code.Unimplemented);
      // A unary handler's signal aborts when the caller's does or the timeout passes. Without a timeout it
      // is the caller's own signal (no controller of our own: creating an AbortSignal, linking it and
      // aborting it at the end cost more than the rest of a short call); with one, or without a signal, a
      // controller of the call's, whose signal is made only if the handler reads it.
      const link = signal && (timeoutMs === undefined || timeoutMs <= 0) ? undefined : linkSignal(signal, timeoutMs);
      // One object literal (a spread of the common fields and a defineProperty of `signal` afterwards cost ≈ 1 % of
      // the split hop's CPU); `signal` an own enumerable property either way, so an interceptor's spread copies it.
      // The fields of `requestCommon`, each from the same helper.
      const url = urlOf(method);
      const requestHeader = requestHeaderOf(header);
      const values = contextValues ?? createContextValues();
      const message = toMessage(method.input, input);
      const call: CallInfo = { spec, timeoutMs };
      const req = (
        link
          ? { stream: false, service: method.parent, method, requestMethod: "POST", url, header: requestHeader, contextValues: values, message, [kCall]: call, get signal() { return link.ac.signal; } }
          : { stream: false, service: method.parent, method, requestMethod: "POST", url, header: requestHeader, contextValues: values, message, [kCall]: call, signal }
      ) as unknown as UnaryRequest;
      try {
        return (await chain(req)) as never;
      } finally {
        link?.release();
      }
    },

    async stream(method, signal, timeoutMs, header, input, contextValues?: ContextValues) {
      const spec = lookup(method);
      if (spec.kind !== "server_streaming") throw new ConnectError("only server streaming is supported in process", Code.Unimplemented);
      const link = linkSignal(signal, timeoutMs);
      // Server streaming has one request message: taken as it is when the caller gave it as one value (the gateway
      // does), else read without a for-await (and its return()).
      const first = input instanceof OneValue ? (input as OneValue<unknown>) : await input[Symbol.asyncIterator]().next();
      const req = {
        stream: true,
        signal: link.ac.signal,
        ...requestCommon(method, header, contextValues),
        message: oneValue(toMessage(method.input, first.value)),
        [kCall]: { spec, timeoutMs } satisfies CallInfo,
      } as unknown as StreamRequest;
      let res: StreamResponse;
      try {
        res = (await chain(req)) as StreamResponse;
      } catch (err) {
        link.end(undefined);
        throw err;
      }
      // One layer between the handler's messages and the caller: each message is made a message of the
      // output type, and when the stream ends or the caller stops reading, the handler sees its signal abort.
      return {
        ...res,
        message: mapMessages(res.message, (out) => toMessage(method.output, out), () => link.end(CLIENT_CLOSED)),
      } as never;
    },
  };
}
