/**
 * An in-process Transport that calls the core's handlers directly: messages cross as objects, not
 * protobuf bytes. The core's interceptors (metrics, error boundary, authentication) run exactly as for
 * network calls; the gateway in `portico serve` uses it, and split deployments use gRPC instead.
 * Unary and server-streaming methods are supported (the gateway uses nothing else); other kinds
 * answer Unimplemented.
 */
import { create, isMessage, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  createHandlerContext,
  createServiceImplSpec,
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

type AnyFn = (req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>;

/**
 * Abort reasons of calls that ended normally, built once: an Error (or the DOMException `abort()` makes
 * without a reason) captures a stack trace, which cost more than the rest of ending a call.
 */
const CALL_ENDED = new ConnectError("the call ended", Code.Canceled);
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

/** An async iterable of one value (cheaper than an async generator). */
function once<T>(value: T): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      let done = false;
      return {
        next: () => {
          if (done) return Promise.resolve({ done: true, value: undefined } as IteratorResult<T>);
          done = true;
          return Promise.resolve({ done: false, value });
        },
        return: () => {
          done = true;
          return Promise.resolve({ done: true, value: undefined } as IteratorResult<T>);
        },
      };
    },
  };
}

/**
 * `source` mapped by `fn`, calling `onEnd` once when it ends, fails or its reader stops (return/throw).
 * A hand-written iterator: every async-generator layer costs several promise turns per message.
 */
function mapMessages<T, U>(source: AsyncIterable<T>, fn: (value: T) => U, onEnd: () => void): AsyncIterable<U> {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      let ended = false;
      const end = () => {
        if (!ended) {
          ended = true;
          onEnd();
        }
      };
      return {
        async next() {
          if (ended) return { done: true, value: undefined };
          try {
            const r = await it.next();
            if (r.done) {
              end();
              return { done: true, value: undefined };
            }
            return { done: false, value: fn(r.value) };
          } catch (err) {
            end();
            throw err;
          }
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

function linkSignal(signal: AbortSignal | undefined, timeoutMs: number | undefined): AbortController {
  const ac = new AbortController();
  if (signal) {
    if (signal.aborted) ac.abort(signal.reason);
    else signal.addEventListener("abort", () => ac.abort(signal.reason), { once: true });
  }
  if (timeoutMs !== undefined && timeoutMs > 0) {
    const timer = setTimeout(() => ac.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);
    timer.unref();
    ac.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
  }
  return ac;
}

/** The fields a unary and a streaming request share, as a network handler would present them. */
function requestCommon(method: DescMethod, ac: AbortController, header: ConstructorParameters<typeof Headers>[0], contextValues: ContextValues | undefined) {
  return {
    service: method.parent,
    method,
    requestMethod: "POST",
    url: `/${method.parent.typeName}/${method.name}`,
    signal: ac.signal,
    header: new Headers(header),
    contextValues: contextValues ?? createContextValues(),
  };
}

export function createDirectTransport(routes: (router: ConnectRouter) => void, interceptors: Interceptor[]): Transport {
  const specs = collectImplementations(routes);

  const lookup = (method: DescMethod): MethodImplSpec => {
    const spec = specs.get(`${method.parent.typeName}/${method.name}`);
    if (!spec) throw new ConnectError(`${method.parent.typeName}/${method.name} is not implemented`, Code.Unimplemented);
    return spec;
  };

  const contextFor = (method: DescMethod, req: UnaryRequest | StreamRequest, timeoutMs: number | undefined) =>
    createHandlerContext({
      service: method.parent,
      method,
      protocolName: "in-process",
      requestMethod: "POST",
      url: req.url,
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      requestSignal: req.signal,
      requestHeader: req.header,
      contextValues: req.contextValues,
    });

  const intercept = (next: AnyFn): AnyFn =>
    interceptors.reduceRight<AnyFn>((n, interceptor) => interceptor(n as never) as AnyFn, next);

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues?: ContextValues) {
      const spec = lookup(method);
      if (spec.kind !== "unary") throw new ConnectError("not a unary method", Code.Unimplemented);
      const ac = linkSignal(signal, timeoutMs);
      const req = {
        stream: false,
        ...requestCommon(method, ac, header, contextValues),
        message: toMessage(method.input, input),
      } as UnaryRequest;
      const run = intercept(async (r) => {
        const ctx = contextFor(method, r, timeoutMs);
        const out = await (spec.impl as (m: unknown, c: unknown) => unknown)(r.message, ctx);
        return {
          stream: false,
          service: method.parent,
          method,
          header: ctx.responseHeader,
          trailer: ctx.responseTrailer,
          message: toMessage(method.output, out),
        } as UnaryResponse;
      });
      try {
        return (await run(req)) as never;
      } finally {
        ac.abort(CALL_ENDED);
      }
    },

    async stream(method, signal, timeoutMs, header, input, contextValues?: ContextValues) {
      const spec = lookup(method);
      if (spec.kind !== "server_streaming") throw new ConnectError("only server streaming is supported in process", Code.Unimplemented);
      const ac = linkSignal(signal, timeoutMs);
      // Server streaming has one request message: take it without a for-await (and its return()).
      const first = await input[Symbol.asyncIterator]().next();
      const req = {
        stream: true,
        ...requestCommon(method, ac, header, contextValues),
        message: once(toMessage(method.input, first.value)),
      } as StreamRequest;
      const run = intercept(async (r) => {
        const ctx = contextFor(method, r, timeoutMs);
        const request = (await (r as StreamRequest).message[Symbol.asyncIterator]().next()).value;
        const iterable = (spec.impl as (m: unknown, c: unknown) => AsyncIterable<unknown>)(request, ctx);
        return {
          stream: true,
          service: method.parent,
          method,
          header: ctx.responseHeader,
          trailer: ctx.responseTrailer,
          message: iterable,
        } as StreamResponse;
      });
      let res: StreamResponse;
      try {
        res = (await run(req)) as StreamResponse;
      } catch (err) {
        ac.abort();
        throw err;
      }
      // One layer between the handler's messages and the caller: each message is made a message of the
      // output type, and when the stream ends or the caller stops reading, the handler sees its signal abort.
      return {
        ...res,
        message: mapMessages(res.message, (out) => toMessage(method.output, out), () => ac.abort(CLIENT_CLOSED)),
      } as never;
    },
  };
}
