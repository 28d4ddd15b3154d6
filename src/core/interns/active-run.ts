/**
 * A run this process relays, in memory: its event queue (what the client's stream reads), the link it
 * runs on, its deadline timer. Its state fields are changed only by the run lifecycle (run-lifecycle.ts).
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import type { RunEvent } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { UsageRecord } from "./intern-repository.js";
import type { InternLink } from "./link-registry.js";
import type { RunEnding } from "./run-endings.js";
import type { Reason } from "../../contract/reasons.js";

export type RunItem =
  | { kind: "event"; event: RunEvent["event"]; bytes: number }
  | { kind: "severed" }
  | { kind: "overflow" }
  | { kind: "aborted" }
  /** The run was ended by the core (e.g. cancelled through the API): render this ending. */
  | { kind: "ended"; ending: RunEnding }
  /** The host refused or never started the run after the response opened (role chunk sent). */
  | { kind: "startFailed"; reason: Reason; message: string; retryable: boolean };

/** A run this process is relaying (streaming, or paused on a link of this process). */
export class ActiveRun {
  state: "starting" | "streaming" | "paused" | "done" = "starting";
  link: InternLink | undefined;
  /** The model every chunk of the current response names (fixed when the response opens). */
  model = "";
  /** The latest model the intern reported; the next response of this run names it. */
  reportedModel = "";
  usage: UsageRecord | undefined;
  /** The run's model calls go through Portico with a run credential: its usage is the sum of its generations. */
  throughGateway = false;
  lastSeq = 0;
  /** A client (StreamChat call) is consuming the queue. */
  attached = false;
  /** Counts the clients that started reading the run: a client's leaving concerns the run only while no later one reads it. */
  reading = 0;
  /** Hash of the API key that started the run (unknown for runs taken over after a reconnect). */
  callerKey: string | undefined;
  interaction: { id: string; deadlineAt: Date; arguments: JsonObject } | undefined;
  deadlineTimer: NodeJS.Timeout | undefined;
  startWaiter: { resolve(): void; reject(err: ConnectError): void } | undefined;
  private queue: RunItem[] = [];
  private head = 0;
  queuedBytes = 0;
  private wake: (() => void) | undefined;

  constructor(
    readonly id: string,
    readonly internId: string,
    readonly sessionRowId: string,
    readonly sessionKey: string,
    readonly approvalMode: "manual" | "self-drive",
  ) {}

  push(item: RunItem): void {
    this.queue.push(item);
    if (item.kind === "event") this.queuedBytes += item.bytes;
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Takes the next queued item without waiting. */
  take(): RunItem | undefined {
    if (this.head >= this.queue.length) return undefined;
    const item = this.queue[this.head]!;
    this.queue[this.head] = undefined as unknown as RunItem;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    if (item.kind === "event") this.queuedBytes -= item.bytes;
    return item;
  }

  /** The next item, or undefined after `idleMs` without one (time for a heartbeat). */
  next(idleMs: number): Promise<RunItem | undefined> | RunItem {
    const ready = this.take();
    if (ready) return ready;
    return new Promise<RunItem | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve(undefined);
      }, idleMs);
      this.wake = () => {
        clearTimeout(timer);
        resolve(this.take());
      };
    });
  }

  clearQueue(): void {
    this.queue = [];
    this.head = 0;
    this.queuedBytes = 0;
  }
}

