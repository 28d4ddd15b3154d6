/**
 * The link client: dials the core's InternLinkService.Attach over HTTP/2 (gRPC), authenticates
 * with the host token, and relays between the core and the host engine. Pings both ways, notices a
 * silent link within the liveness timeout, reconnects with exponential backoff and jitter, and
 * re-announces paused runs in Hello after a reconnect.
 */
import { accessSync, constants as fsConstants } from "node:fs";
import { EventEmitter } from "node:events";
import { createClient, ConnectError, Code, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { coreSessionOptions } from "./tls.js";
import { parseCoreUrls } from "../lib/core-urls.js";
import { createSilenceWatch } from "../lib/silence.js";
import { create } from "@bufbuild/protobuf";
import { pino, type Logger } from "pino";
import {
  AttachRequestSchema,
  InternLinkService,
  type AttachRequest,
  type AttachResponse,
} from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { createHostEngine, type HostEngine, type SessionInfo } from "./engine.js";
import { resolveLimits, type InternHostOptions } from "./options.js";
import { bwrapMissingNotice, resolveBwrap } from "./sandbox.js";

export const HOST_VERSION = "0.1.0";

/** A running intern host. */
export interface InternHost {
  /** Resolves with the intern id once the first Welcome arrived. */
  readonly ready: Promise<string>;
  /** True while a link is established (after Welcome). */
  readonly connected: boolean;
  /** Intern id from the last Welcome. */
  readonly internId: string | undefined;
  /** Events: "connected" (internId), "disconnected" (reason string). */
  readonly events: EventEmitter;
  /** Diagnostics: sessions and their agent processes. */
  sessions(): SessionInfo[];
  /** Current load. */
  capacity(): { runningRuns: number; pausedRuns: number; busy: boolean };
  /** Closes the link, cancels runs and stops every agent process. */
  close(): Promise<void>;
}

/** An async-iterable mailbox the gRPC request stream pulls from. */
class Outbox implements AsyncIterable<AttachRequest> {
  private control: AttachRequest[] = [];
  private wake: (() => void) | undefined;
  private done = false;
  constructor(
    private readonly takeEvent: () => AttachRequest | undefined,
    private readonly capacityMessage: () => AttachRequest | undefined,
  ) {}
  push(m: AttachRequest): void {
    this.control.push(m);
    this.notify();
  }
  notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }
  close(): void {
    this.done = true;
    this.notify();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<AttachRequest> {
    while (!this.done) {
      const next = this.control.shift() ?? this.capacityMessage() ?? this.takeEvent();
      if (next) {
        yield next;
        continue;
      }
      await new Promise<void>((r) => (this.wake = r));
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts an intern host: it dials the core, keeps the link up and drives agents as the core asks.
 * Why a factory over the options: the CLI, the embedded host and tests share one code path.
 */
export function createInternHost(options: InternHostOptions): InternHost {
  if (!options.transport && !options.coreUrl) throw new Error("createInternHost needs coreUrl or transport");
  const coreUrls = options.transport ? [] : parseCoreUrls(options.coreUrl!, "intern-host --core");
  const sessionOptions = coreUrls.map((url) => coreSessionOptions(url, options.tls));
  /** Index of the core the next attach dials (several URLs: failover in order). */
  let coreIndex = 0;
  const limits = resolveLimits(options.limits);
  const logger = (options.logger ?? pino({ level: "silent" })).child({ component: "intern-host" });
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  const runAs = isRoot ? (options.runAs === undefined ? { uid: 65534, gid: 65534 } : (options.runAs ?? undefined)) : undefined;
  const bwrap = resolveBwrap(options.bwrapPath);
  const bwrapNotice = bwrap ? null : bwrapMissingNotice(options.profile);
  if (bwrapNotice) logger[bwrapNotice.level](bwrapNotice.message);
  const events = new EventEmitter();
  const closeCtl = new AbortController();
  // Which bubblewrap the host uses and as whom agents run (PORTICO_HOST_BWRAP, PORTICO_HOST_RUN_AS).
  if (bwrap) logger.info({ bwrap, runAs: runAs ? `${runAs.uid}:${runAs.gid}` : "self" }, "manual-mode commands are sandboxed with bubblewrap");
  if (bwrap && options.bwrapPath && !isExecutable(bwrap)) logger.warn({ bwrap }, "the configured bwrap is not an executable file: sandboxed commands will fail to start");

  let outbox: Outbox | undefined;
  let welcomed = false;
  let capacityDirty = false;
  let internId: string | undefined;
  let pingIntervalMs = limits.pingIntervalMs;
  let livenessTimeoutMs = limits.livenessTimeoutMs;
  let nonce = 0n;

  const engine: HostEngine = createHostEngine({
    profile: options.profile,
    workRoot: options.workRoot,
    limits,
    logger,
    runAs,
    bwrap,
    launcher: options.launcher,
    hostVersion: options.hostVersion ?? HOST_VERSION,
    gatewayCa: options.tls?.ca ?? options.tls?.pinnedCert,
    onReadable: () => outbox?.notify(),
    onCapacity: () => {
      capacityDirty = true;
      outbox?.notify();
    },
  });

  let resolveReady!: (id: string) => void;
  const ready = new Promise<string>((r) => (resolveReady = r));

  function takeEvent(): AttachRequest | undefined {
    if (!welcomed) return undefined;
    const ev = engine.takeEvent();
    return ev ? create(AttachRequestSchema, { message: { case: "runEvent", value: ev } }) : undefined;
  }

  function capacityMessage(): AttachRequest | undefined {
    if (!welcomed || !capacityDirty) return undefined;
    capacityDirty = false;
    return create(AttachRequestSchema, { message: { case: "capacity", value: engine.capacity() } });
  }

  function handle(msg: AttachResponse, box: Outbox): void {
    const m = msg.message;
    switch (m.case) {
      case "welcome": {
        welcomed = true;
        internId = m.value.internId;
        if (m.value.pingIntervalMs > 0) pingIntervalMs = m.value.pingIntervalMs;
        if (m.value.livenessTimeoutMs > 0) livenessTimeoutMs = m.value.livenessTimeoutMs;
        engine.linkUp(m.value.cancelRunIds);
        capacityDirty = true;
        logger.info({ internId, core: coreUrls[coreIndex] }, "link established");
        resolveReady(internId);
        events.emit("connected", internId);
        box.notify();
        return;
      }
      case "startRun":
        engine.startRun(m.value);
        return;
      case "answer": {
        const outcome = engine.answer(m.value.runId, m.value.interactionId, m.value.answer);
        box.push(
          create(AttachRequestSchema, {
            message: { case: "answerResult", value: { runId: m.value.runId, interactionId: m.value.interactionId, outcome } },
          }),
        );
        return;
      }
      case "cancelRun":
        engine.cancelRun(m.value.runId, m.value.reason);
        return;
      case "ping":
        box.push(create(AttachRequestSchema, { message: { case: "pong", value: { nonce: m.value.nonce } } }));
        return;
      case "pong":
        return;
      default:
        return;
    }
  }

  async function attachOnce(): Promise<boolean> {
    let sessionManager: Http2SessionManager | undefined;
    let transport: Transport;
    const coreUrl = coreUrls[coreIndex];
    if (options.transport) transport = options.transport;
    else {
      sessionManager = new Http2SessionManager(coreUrl!, undefined, sessionOptions[coreIndex]);
      transport = createGrpcTransport({ baseUrl: coreUrl!, sessionManager });
    }
    const client = createClient(InternLinkService, transport);
    const ac = new AbortController();
    const onClose = (): void => ac.abort(new Error("host closing"));
    closeCtl.signal.addEventListener("abort", onClose, { once: true });
    const box = new Outbox(takeEvent, capacityMessage);
    outbox = box;
    welcomed = false;
    box.push(
      create(AttachRequestSchema, {
        message: {
          case: "hello",
          value: {
            hostVersion: options.hostVersion ?? HOST_VERSION,
            agentName: engine.agentName(),
            maxConcurrentRuns: limits.maxConcurrentRuns,
            maxPausedRuns: limits.maxPausedRuns,
            heldRuns: engine.heldRuns(),
          },
        },
      }),
    );
    const tickMs = Math.max(50, Math.min(250, Math.floor(pingIntervalMs / 4)));
    // The core's silence in this process's awake time: a stall of the host process is not the core's silence.
    const silence = createSilenceWatch(tickMs);
    let lastPing = Date.now();
    const tick = setInterval(() => {
      const now = Date.now();
      const silentMs = silence.check();
      if (silentMs > livenessTimeoutMs) {
        logger.warn({ silentMs }, "link silent past the liveness timeout; reconnecting");
        ac.abort(new Error("link silent"));
        return;
      }
      if (welcomed && now - lastPing >= pingIntervalMs) {
        lastPing = now;
        nonce += 1n;
        box.push(create(AttachRequestSchema, { message: { case: "ping", value: { nonce } } }));
      }
    }, tickMs);
    let wasWelcomed = false;
    let reason = "stream ended";
    try {
      const responses = client.attach(box, {
        signal: ac.signal,
        headers: { authorization: `Bearer ${options.token}` },
      });
      for await (const msg of responses) {
        silence.heard();
        handle(msg, box);
        if (welcomed) wasWelcomed = true;
      }
    } catch (err) {
      const ce = ConnectError.from(err);
      reason = ce.rawMessage;
      if (ce.code === Code.Unauthenticated || ce.code === Code.PermissionDenied) {
        logger.error({ code: Code[ce.code] }, "the core refused the host token");
      } else if (!closeCtl.signal.aborted) {
        logger.warn({ code: Code[ce.code], reason: ce.rawMessage, core: coreUrl }, "link broke");
      }
    } finally {
      clearInterval(tick);
      closeCtl.signal.removeEventListener("abort", onClose);
      ac.abort();
      box.close();
      if (outbox === box) outbox = undefined;
      welcomed = false;
      sessionManager?.abort();
      engine.linkDown();
      if (wasWelcomed) events.emit("disconnected", reason);
    }
    return wasWelcomed;
  }

  const loop = (async () => {
    let attempt = 0;
    /** Cores tried since the last link, or since the last backoff. */
    let tried = 0;
    while (!closeCtl.signal.aborted) {
      const ok = await attachOnce();
      if (closeCtl.signal.aborted) break;
      if (ok) {
        attempt = 0;
        tried = 0;
      }
      if (coreUrls.length > 1) {
        // Failover: the next core at once; back off only after every core failed in turn.
        coreIndex = (coreIndex + 1) % coreUrls.length;
        tried++;
        if (ok || tried < coreUrls.length) continue;
        tried = 0;
      }
      const base = Math.min(limits.reconnectMaxMs, limits.reconnectInitialMs * 2 ** Math.min(attempt, 20));
      const delay = Math.round(base / 2 + Math.random() * (base / 2));
      attempt++;
      logger.debug({ delay, attempt }, "reconnecting");
      await sleep(delay, closeCtl.signal);
    }
  })();

  return {
    ready,
    events,
    get connected() {
      return welcomed;
    },
    get internId() {
      return internId;
    },
    sessions: () => engine.sessions(),
    capacity: () => engine.capacity(),
    async close() {
      if (closeCtl.signal.aborted) return;
      closeCtl.abort();
      await loop;
      await engine.close();
    },
  };
}
