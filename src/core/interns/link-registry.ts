/**
 * Live host links of this core process: one per intern. A link owns its outbound queue (what the
 * Attach handler yields), liveness (pings and a silence timeout), the host's reported capacity and
 * the answers awaiting an AnswerResult. Run events are handed to the run manager.
 */
import { create } from "@bufbuild/protobuf";
import {
  AnswerOutcome,
  AttachResponseSchema,
  type AnswerResult,
  type AttachResponse,
  type CancelReason,
  type Hello,
  type RunEvent,
  type StartRun,
} from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import { createSilenceWatch, type SilenceWatch } from "../../lib/silence.js";

export interface LinkEvents {
  onRunEvent(link: InternLink, event: RunEvent): void;
  onCapacity(link: InternLink): void;
  onClosed(link: InternLink, reason: string): void;
}

export interface LinkTiming {
  pingIntervalMs: number;
  livenessTimeoutMs: number;
}

/** Outcome of delivering an answer over a link. */
export type AnswerDelivery = AnswerOutcome | "timeout" | "link_lost";

let linkCounter = 0;

export class InternLink {
  readonly serial = ++linkCounter;
  readonly openedAt = Date.now();
  capacity = { runningRuns: 0, pausedRuns: 0, busy: false };
  closed = false;
  closeReason = "";
  private outbox: AttachResponse[] = [];
  private wake: (() => void) | undefined;
  /** The host's silence in this process's awake time (a stall of this process is not the host's silence). */
  private silence: SilenceWatch;
  private nonce = 0n;
  private ticker: NodeJS.Timeout;
  private answers = new Map<string, (outcome: AnswerDelivery) => void>();

  constructor(
    readonly internId: string,
    readonly hello: Hello,
    private readonly timing: LinkTiming,
    private readonly events: LinkEvents,
  ) {
    const tickMs = Math.max(25, Math.min(timing.pingIntervalMs, Math.floor(timing.livenessTimeoutMs / 4)));
    let sincePing = 0;
    this.silence = createSilenceWatch(tickMs);
    this.ticker = setInterval(() => {
      if (this.silence.check() > timing.livenessTimeoutMs) {
        this.close("liveness timeout");
        return;
      }
      sincePing += tickMs;
      if (sincePing >= timing.pingIntervalMs) {
        sincePing = 0;
        this.nonce += 1n;
        this.send({ case: "ping", value: { $typeName: "portico.internlink.v1.Ping", nonce: this.nonce } });
      }
    }, tickMs);
    this.ticker.unref();
  }

  /** Queues a message for the host; false when the link is closed. */
  send(message: AttachResponse["message"]): boolean {
    if (this.closed) return false;
    this.outbox.push(create(AttachResponseSchema, { message }));
    const w = this.wake;
    this.wake = undefined;
    w?.();
    return true;
  }

  /** Sends the Welcome ahead of anything queued while the Hello was being reconciled. */
  welcome(cancelRunIds: string[]): void {
    if (this.closed) return;
    this.outbox.unshift(
      create(AttachResponseSchema, {
        message: {
          case: "welcome",
          value: {
            $typeName: "portico.internlink.v1.Welcome",
            internId: this.internId,
            pingIntervalMs: this.timing.pingIntervalMs,
            livenessTimeoutMs: this.timing.livenessTimeoutMs,
            cancelRunIds,
          },
        },
      }),
    );
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  startRun(msg: Omit<StartRun, "$typeName">): boolean {
    return this.send({ case: "startRun", value: { $typeName: "portico.internlink.v1.StartRun", ...msg } });
  }

  cancelRun(runId: string, reason: CancelReason): boolean {
    return this.send({ case: "cancelRun", value: { $typeName: "portico.internlink.v1.CancelRun", runId, reason } });
  }

  /** Sends an answer and waits for the host's AnswerResult (or the timeout, or the link's end). */
  deliverAnswer(runId: string, interactionId: string, answer: string, timeoutMs: number): Promise<AnswerDelivery> {
    if (this.closed) return Promise.resolve("link_lost");
    return new Promise<AnswerDelivery>((resolve) => {
      const timer = setTimeout(() => settle("timeout"), timeoutMs);
      const settle = (outcome: AnswerDelivery) => {
        clearTimeout(timer);
        if (this.answers.get(interactionId) === settle) this.answers.delete(interactionId);
        resolve(outcome);
      };
      this.answers.get(interactionId)?.("timeout");
      this.answers.set(interactionId, settle);
      this.send({ case: "answer", value: { $typeName: "portico.internlink.v1.Answer", runId, interactionId, answer } });
    });
  }

  /** Called by the Attach handler for every message from the host. */
  receive(msg: import("../../gen/portico/internlink/v1/internlink_service_pb.js").AttachRequest): void {
    if (this.closed) return;
    this.silence.heard();
    const m = msg.message;
    switch (m.case) {
      case "runEvent":
        this.events.onRunEvent(this, m.value);
        return;
      case "answerResult":
        this.onAnswerResult(m.value);
        return;
      case "capacity":
        this.capacity = { runningRuns: m.value.runningRuns, pausedRuns: m.value.pausedRuns, busy: m.value.busy };
        this.events.onCapacity(this);
        return;
      case "ping":
        this.send({ case: "pong", value: { $typeName: "portico.internlink.v1.Pong", nonce: m.value.nonce } });
        return;
      default:
        return;
    }
  }

  private onAnswerResult(r: AnswerResult): void {
    const settle = this.answers.get(r.interactionId);
    settle?.(r.outcome === AnswerOutcome.UNSPECIFIED ? AnswerOutcome.NOT_PENDING : r.outcome);
  }

  /** The outbound messages, ending when the link closes. */
  async *messages(): AsyncGenerator<AttachResponse> {
    for (;;) {
      const next = this.outbox.shift();
      if (next) {
        yield next;
        continue;
      }
      if (this.closed) return;
      await new Promise<void>((r) => (this.wake = r));
    }
  }

  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = reason;
    clearInterval(this.ticker);
    for (const settle of [...this.answers.values()]) settle("link_lost");
    this.answers.clear();
    this.outbox = [];
    const w = this.wake;
    this.wake = undefined;
    w?.();
    this.events.onClosed(this, reason);
  }
}

/** The live links of this process, keyed by intern id. */
export class LinkRegistry {
  private links = new Map<string, InternLink>();

  get(internId: string): InternLink | undefined {
    const l = this.links.get(internId);
    return l && !l.closed ? l : undefined;
  }

  /** Registers a new link; an older link of the same intern is closed ("replaced"). */
  register(link: InternLink): void {
    const old = this.links.get(link.internId);
    this.links.set(link.internId, link);
    if (old && old !== link) old.close("replaced by a newer link");
  }

  /** Forgets a closed link unless a newer one replaced it; true when it was the current one. */
  remove(link: InternLink): boolean {
    if (this.links.get(link.internId) !== link) return false;
    this.links.delete(link.internId);
    return true;
  }

  all(): InternLink[] {
    return [...this.links.values()];
  }
}
