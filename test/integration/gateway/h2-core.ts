/**
 * The set-up shared by hop-channel.test.ts and h2-grpc-transport.test.ts: a core as `portico core` serves (HTTP/2,
 * streams to the gRPC fast path) with the chat service each file defines, and a node:http2 client on it. A test
 * states only what differs: which core (the file's shared one, or one of its own that it may stop or kill), the
 * transport's options, and what it does with the client. What it started is closed after it, whatever it closed itself.
 */
import http2 from "node:http2";
import { once } from "node:events";
import { Code, ConnectError, createClient, type Client, type ConnectRouter } from "@connectrpc/connect";
import { expect } from "vitest";
import { createDirectTransport } from "../../../src/core/direct-transport.js";
import { createGrpcFastPath, type GrpcFastPath } from "../../../src/core/grpc-fast-path.js";
import { createH2GrpcTransport, type H2GrpcTransportOptions } from "../../../src/gateway/h2-grpc-transport.js";
import { ChatService } from "../../../src/gen/portico/chat/v1/chat_service_pb.js";
import { HopService } from "../../../src/gen/portico/hop/v1/hop_service_pb.js";
import { waitFor } from "../../helpers/wait.js";

export const HOP_PATH = `/${HopService.typeName}/${HopService.method.exchange.name}`;
export const CHAT_PATH = `/${ChatService.typeName}/${ChatService.method.createChatCompletion.name}`;

export interface CoreOptions {
  /** 0 or unset: any free port. */
  port?: number;
  readMaxBytes?: number;
  /** An older core, whose server answers the channel's path as an unknown one (404, which gRPC reads as Unimplemented), or with gRPC Unimplemented. */
  withoutChannel?: "http-404" | "grpc-unimplemented";
}

export type Core = Awaited<ReturnType<ReturnType<typeof h2Cores>["start"]>>;

/** What `withClient` sets up: an existing core (left running) or options for one of the test's own (killed after). */
export interface Setup {
  core?: Core;
  start?: CoreOptions;
  transport?: Omit<H2GrpcTransportOptions, "baseUrl">;
}

/** Cores serving `routes`, and clients on them. */
export function h2Cores(routes: (router: ConnectRouter) => void) {
  /**
   * A core; `stop()` closes as its preClose hook does (sessions closed, the fast path drained, the server closed),
   * `kill()` drops every connection at once (a core that dies). Either, called again, waits for the same close.
   */
  async function start(opts: CoreOptions = {}) {
    const fastPath: GrpcFastPath = createGrpcFastPath(routes, createDirectTransport(routes, []), opts.readMaxBytes ?? 4 * 1024 * 1024);
    const server = http2.createServer();
    const sessions = new Set<http2.ServerHttp2Session>();
    const streams: string[] = [];
    const closedChannels: number[] = [];
    server.on("session", (s) => {
      sessions.add(s);
      s.on("close", () => sessions.delete(s));
    });
    server.on("stream", (stream, headers) => {
      const path = headers[":path"]!;
      streams.push(path);
      if (path === HOP_PATH) stream.on("close", () => closedChannels.push(streams.length));
      if (path === HOP_PATH && opts.withoutChannel === "http-404") return stream.respond({ ":status": 404 }, { endStream: true });
      if (path === HOP_PATH && opts.withoutChannel === "grpc-unimplemented") {
        return stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "12", "grpc-message": "unknown service" }, { endStream: true });
      }
      if (!fastPath.handle(stream, headers)) stream.respond({ ":status": 404 }, { endStream: true });
    });
    server.listen(opts.port ?? 0, "127.0.0.1");
    await once(server, "listening");
    const port = (server.address() as { port: number }).port;
    let closed: Promise<void> | undefined;
    const close = (how: () => void) => {
      closed ??= (async () => {
        const done = once(server, "close");
        how();
        await done;
      })();
      return closed;
    };
    return {
      port,
      url: `http://127.0.0.1:${port}`,
      fastPath,
      sessions,
      /** The request paths of the HTTP/2 streams opened on this core, in order. */
      streams,
      closedChannels,
      /** Stops as `portico core` does on SIGTERM; resolves when the server has closed. */
      stop: () =>
        close(() => {
          for (const s of sessions) s.close();
          fastPath.drain();
          server.close();
        }),
      kill: () =>
        close(() => {
          for (const s of sessions) s.destroy();
          server.close();
        }),
    };
  }

  /** A node:http2 client on a core; the transport is closed after `body`, and the core too unless it was given. */
  async function withClient<T>(setup: Setup, body: (s: { core: Core; client: Client<typeof ChatService>; transport: ReturnType<typeof createH2GrpcTransport> }) => Promise<T>): Promise<T> {
    const core = setup.core ?? (await start(setup.start));
    const transport = createH2GrpcTransport({ baseUrl: core.url, ...setup.transport });
    try {
      return await body({ core, client: createClient(ChatService, transport), transport });
    } finally {
      transport.close();
      if (!setup.core) await core.kill();
    }
  }

  return { start, withClient };
}

/** The error a call fails with (it must fail, with a ConnectError). */
export async function failureOf(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return err as ConnectError;
  }
  throw new Error("the call succeeded");
}

/** After a core came back: each call is Unavailable until one is served; that answer. */
export function servedAgain<T>(call: () => Promise<T>): Promise<T> {
  return waitFor("a call served by the restarted core", async () => {
    try {
      return await call();
    } catch (err) {
      expect((err as ConnectError).code).toBe(Code.Unavailable);
      return undefined;
    }
  });
}
