/**
 * A run's bounded event queue: sequence numbers, a byte budget (terminal events always fit), and
 * at most one terminal event. The engine drains queues round-robin with {@link takeRoundRobin}.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { RunEventSchema, type RunEvent } from "../gen/portico/internlink/v1/internlink_service_pb.js";

type RunEventInit = MessageInitShape<typeof RunEventSchema>;
export type EventInit = NonNullable<RunEventInit["event"]>;

export function eventBytes(ev: EventInit): number {
  const v = ev.value as { text?: unknown; message?: unknown } | undefined;
  const text = typeof v?.text === "string" ? v.text : typeof v?.message === "string" ? v.message : "";
  return Buffer.byteLength(text) + 48;
}

export function isTerminalCase(c: EventInit["case"]): boolean {
  return c === "rejected" || c === "turnEnded" || c === "turnFailed" || c === "runEnded";
}

export type PushResult = "queued" | "closed" | "overflow";

export class RunEventQueue {
  private items: Array<{ event: RunEvent; bytes: number }> = [];
  private bytes = 0;
  private nextSeq = 1n;
  /** Seq of the last event handed to the link. */
  lastTakenSeq = 0n;
  terminalQueued = false;

  constructor(
    readonly runId: string,
    private readonly maxBytes: number,
  ) {}

  /** Adds an event; "closed" after a terminal event, "overflow" when a non-terminal one does not fit. */
  push(ev: EventInit): PushResult {
    if (this.terminalQueued) return "closed";
    const terminal = isTerminalCase(ev.case);
    const bytes = eventBytes(ev);
    if (!terminal && this.bytes + bytes > this.maxBytes) return "overflow";
    this.items.push({ event: create(RunEventSchema, { runId: this.runId, seq: this.nextSeq, event: ev }), bytes });
    this.nextSeq += 1n;
    this.bytes += bytes;
    if (terminal) this.terminalQueued = true;
    return "queued";
  }

  shift(): RunEvent | undefined {
    const item = this.items.shift();
    if (!item) return undefined;
    this.bytes -= item.bytes;
    this.lastTakenSeq = item.event.seq;
    return item.event;
  }

  clear(): void {
    this.items = [];
    this.bytes = 0;
  }

  get length(): number {
    return this.items.length;
  }

  get queuedBytes(): number {
    return this.bytes;
  }
}

/**
 * Takes the next event from the first eligible queue at or after the cursor; returns the event, the
 * owner it came from and the new cursor.
 */
export function takeRoundRobin<T>(
  owners: readonly T[],
  cursor: number,
  queueOf: (o: T) => RunEventQueue | undefined,
): { owner: T; event: RunEvent; cursor: number } | undefined {
  for (let i = 0; i < owners.length; i++) {
    const owner = owners[(cursor + i) % owners.length]!;
    const q = queueOf(owner);
    const event = q?.shift();
    if (event) return { owner, event, cursor: (cursor + i + 1) % owners.length };
  }
  return undefined;
}
