/**
 * A small fake core for host tests: InternLinkService over h2c with connectNodeAdapter on
 * 127.0.0.1:0. Records what each link receives and lets the test send core → host messages.
 */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  AttachResponseSchema,
  InternLinkService,
  type AttachRequest,
  type AttachResponse,
  type Hello,
  type RunEvent,
} from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { waitFor } from "../../helpers/wait.js";

type ResponseInit = MessageInitShape<typeof AttachResponseSchema>;

export class FakeLink {
  received: AttachRequest[] = [];
  hello: Hello | undefined;
  authorization: string | undefined;
  silenced = false;
  ended = false;
  private out: AttachResponse[] = [];
  private wakeOut: (() => void) | undefined;
  endedPromise: Promise<void>;
  private resolveEnded!: () => void;

  constructor(readonly core: FakeCore) {
    this.endedPromise = new Promise((r) => (this.resolveEnded = r));
  }

  send(init: ResponseInit): void {
    if (this.ended) return;
    this.out.push(create(AttachResponseSchema, init));
    const w = this.wakeOut;
    this.wakeOut = undefined;
    w?.();
  }

  /** Stop sending anything (pings, pongs, messages) and ignore input: a silent link. */
  silence(): void {
    this.silenced = true;
  }

  onRequest(r: AttachRequest): void {
    if (this.silenced) return;
    this.received.push(r);
    const m = r.message;
    if (m.case === "hello") {
      this.hello = m.value;
      this.send({
        message: {
          case: "welcome",
          value: {
            internId: this.core.opts.internId ?? "intern-1",
            pingIntervalMs: this.core.opts.pingIntervalMs ?? 500,
            livenessTimeoutMs: this.core.opts.livenessTimeoutMs ?? 2000,
            cancelRunIds: this.core.cancelOnWelcome,
          },
        },
      });
    } else if (m.case === "ping") {
      this.send({ message: { case: "pong", value: { nonce: m.value.nonce } } });
    }
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    const w = this.wakeOut;
    this.wakeOut = undefined;
    w?.();
    this.resolveEnded();
  }

  async *outgoing(signal: AbortSignal): AsyncGenerator<AttachResponse> {
    let lastPing = Date.now();
    const interval = this.core.opts.pingIntervalMs ?? 500;
    while (!this.ended && !signal.aborted) {
      const next = this.silenced ? undefined : this.out.shift();
      if (next) {
        yield next;
        continue;
      }
      if (!this.silenced && Date.now() - lastPing >= interval) {
        lastPing = Date.now();
        yield create(AttachResponseSchema, { message: { case: "ping", value: { nonce: 1n } } });
        continue;
      }
      await new Promise<void>((r) => {
        this.wakeOut = r;
        setTimeout(r, Math.min(100, interval)).unref();
      });
    }
  }

  runEvents(runId?: string): RunEvent[] {
    return this.received
      .filter((r) => r.message.case === "runEvent")
      .map((r) => r.message.value as RunEvent)
      .filter((e) => runId === undefined || e.runId === runId);
  }

  /** Waits (test/helpers/wait.ts) until pred holds over the received messages; a timeout names what was received. */
  waitFor<T>(pred: (link: FakeLink) => T | undefined | false, timeoutMs = 8000, what = "condition"): Promise<T> {
    return waitFor(() => `${what}; received: ${this.describe()}`, () => pred(this), { timeoutMs, intervalMs: 10 });
  }

  /** Waits for a run event of the given case and returns it. */
  waitForEvent(runId: string, kase: NonNullable<RunEvent["event"]["case"]>, timeoutMs = 8000): Promise<RunEvent> {
    return this.waitFor((l) => l.runEvents(runId).find((e) => e.event.case === kase), timeoutMs, `${kase} of ${runId}`);
  }

  describe(): string {
    return this.received
      .map((r) => (r.message.case === "runEvent" ? `${r.message.value.runId}#${r.message.value.seq}:${r.message.value.event.case}` : r.message.case))
      .filter((s) => s !== "ping" && s !== "pong")
      .join(", ");
  }
}

export interface FakeCoreOptions {
  token?: string;
  internId?: string;
  pingIntervalMs?: number;
  livenessTimeoutMs?: number;
}

export class FakeCore {
  links: FakeLink[] = [];
  cancelOnWelcome: string[] = [];
  url = "";
  private server: http2.Http2Server;
  private sessions = new Set<http2.ServerHttp2Session>();
  private linkWaiters: Array<(l: FakeLink) => void> = [];

  constructor(readonly opts: FakeCoreOptions = {}) {
    const routes = (router: ConnectRouter): void => {
      router.service(InternLinkService, {
        attach: (requests, ctx) => {
          const auth = ctx.requestHeader.get("authorization") ?? undefined;
          if (auth !== `Bearer ${this.opts.token ?? "pht-test"}`) throw new ConnectError("bad host token", Code.Unauthenticated);
          const link = new FakeLink(this);
          link.authorization = auth;
          this.links.push(link);
          for (const w of this.linkWaiters.splice(0)) w(link);
          void (async () => {
            try {
              for await (const r of requests) link.onRequest(r);
            } catch {
              // link broke
            } finally {
              link.end();
            }
          })();
          ctx.signal.addEventListener("abort", () => link.end(), { once: true });
          return link.outgoing(ctx.signal);
        },
      });
    };
    this.server = http2.createServer(connectNodeAdapter({ routes }));
    this.server.on("session", (s) => {
      this.sessions.add(s);
      s.on("close", () => this.sessions.delete(s));
    });
  }

  async listen(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The next link to attach (or the latest one if `afterCount` links already exist). */
  nextLink(afterCount = this.links.length, timeoutMs = 8000): Promise<FakeLink> {
    const existing = this.links[afterCount];
    if (existing) return Promise.resolve(existing);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("no link attached in time")), timeoutMs);
      const check = (): void => {
        const l = this.links[afterCount];
        if (l) {
          clearTimeout(t);
          resolve(l);
        } else this.linkWaiters.push(check);
      };
      check();
    });
  }

  /** Breaks every HTTP/2 connection (a network drop). */
  dropConnections(): void {
    for (const s of this.sessions) s.destroy();
    for (const l of this.links) l.end();
  }

  async close(): Promise<void> {
    this.dropConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

export function startRun(
  link: FakeLink,
  init: {
    runId: string;
    sessionId: string;
    prompt: string;
    manual?: boolean;
    deadlineMs?: number;
    /** StartRun.gateway: where the run's model calls go. */
    gateway?: { baseUrl: string; token: string; model?: string; expiresAtMs?: number };
  },
): void {
  link.send({
    message: {
      case: "startRun",
      value: {
        runId: init.runId,
        sessionId: init.sessionId,
        prompt: init.prompt,
        approvalMode: init.manual ? 2 : 1,
        interactionDeadlineMs: BigInt(init.deadlineMs ?? 0),
        ...(init.gateway
          ? {
              gateway: {
                baseUrl: init.gateway.baseUrl,
                token: init.gateway.token,
                model: init.gateway.model ?? "",
                expiresAtMs: BigInt(init.gateway.expiresAtMs ?? Date.now() + 600_000),
              },
            }
          : {}),
      },
    },
  });
}

export function answer(link: FakeLink, runId: string, interactionId: string, value: string): void {
  link.send({ message: { case: "answer", value: { runId, interactionId, answer: value } } });
}

/** Concatenated content text of a run. */
export function contentOf(link: FakeLink, runId: string, kase: "content" | "reasoning" = "content"): string {
  return link
    .runEvents(runId)
    .filter((e) => e.event.case === kase)
    .map((e) => (e.event.value as { text: string }).text)
    .join("");
}

/** Checks seq starts at 1 without gaps or duplicates. */
export function seqsOf(link: FakeLink, runId: string): bigint[] {
  return link.runEvents(runId).map((e) => e.seq);
}
