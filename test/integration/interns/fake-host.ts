/**
 * A small scripted intern host for tests: dials the core's InternLinkService.Attach over gRPC (HTTP/2)
 * with a host token and answers StartRun / Answer / CancelRun by script. It stands in for the real
 * host (src/host) where a test needs exact control of the link.
 */
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import {
  AnswerOutcome,
  AttachRequestSchema,
  CancelReason,
  InternLinkService,
  type Answer,
  type AttachRequest,
  type AttachResponse,
  type CancelRun,
  type HeldRun,
  type RunEvent,
  type StartRun,
  type Welcome,
} from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";

type EventInit = RunEvent["event"];

export interface FakeRun {
  start: StartRun;
  seq: number;
  pendingQuestion?: { id: string; options: string[] };
  ended: boolean;
}

export interface FakeHost {
  welcome: Promise<Welcome>;
  runs: Map<string, FakeRun>;
  cancels: CancelRun[];
  answers: Answer[];
  received: AttachResponse[];
  /** Emits one run event with the next sequence number. */
  emit(runId: string, event: EventInit): void;
  /** Sends a raw message (e.g. a Capacity). */
  send(msg: AttachRequest["message"]): void;
  /** Stops replying to pings (the core should notice within the liveness timeout). */
  goSilent(): void;
  /** Breaks the link abruptly. */
  kill(): void;
  closed: Promise<void>;
  /** Resolves when a predicate over what the host received holds. */
  waitFor<T>(fn: () => T | undefined | false, timeoutMs?: number): Promise<T>;
}

export interface FakeHostOptions {
  coreUrl: string;
  token: string;
  heldRuns?: HeldRun[];
  maxConcurrentRuns?: number;
  maxPausedRuns?: number;
  /** Overrides the default prompt script. Return true when handled. */
  onStart?: (run: FakeRun, host: FakeHost) => boolean | void;
  /** Answer outcome override. */
  onAnswer?: (a: Answer, run: FakeRun | undefined, host: FakeHost) => AnswerOutcome | undefined;
  /** Existing runs (from a previous link of the same fake host) to keep answering. */
  runs?: Map<string, FakeRun>;
}

export const MODEL = "fake/model-1";

/**
 * The default script reads the prompt:
 *  "hello"  → content "Hello", " world", usage, turn ended
 *  "ask"    → content "before", a question (allow_once/reject_once); after allow: "after", usage, end
 *  "fail"   → usage, turn failed (502 turn_failed)
 *  "end"    → run ended (cancelled)
 *  "agent-cancel" → content, usage (with cached tokens), turn ended with the agent's own "cancelled"
 *  "busy"   → rejected busy;  "timeout" → rejected timeout
 *  "slow"   → content "tick" then silence until cancelled
 *  "nostart"→ nothing at all
 *  "flood N"→ N content chunks "c<i>" then end
 */
export function defaultScript(run: FakeRun, host: FakeHost): void {
  const id = run.start.runId;
  const [cmd, arg] = run.start.prompt.trim().split(/\s+/);
  const started = () => host.emit(id, { case: "started", value: {} as never });
  switch (cmd) {
    case "hello":
      started();
      host.emit(id, { case: "model", value: { model: MODEL } as never });
      host.emit(id, { case: "reasoning", value: { text: "thinking" } as never });
      host.emit(id, { case: "content", value: { text: "Hello" } as never });
      host.emit(id, { case: "content", value: { text: " world" } as never });
      host.emit(id, { case: "usage", value: { promptTokens: 3n, completionTokens: 2n, totalTokens: 5n, cost: 0.001 } as never });
      host.emit(id, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
      run.ended = true;
      return;
    case "ask": {
      started();
      host.emit(id, { case: "model", value: { model: MODEL } as never });
      host.emit(id, { case: "content", value: { text: "before" } as never });
      const qid = randomUUID();
      run.pendingQuestion = { id: qid, options: ["allow_once", "reject_once"] };
      host.emit(id, {
        case: "question",
        value: { interactionId: qid, kind: "permission", operation: "shell", options: ["allow_once", "reject_once"] } as never,
      });
      return;
    }
    case "fail":
      started();
      host.emit(id, { case: "usage", value: { promptTokens: 1n, completionTokens: 1n, totalTokens: 2n } as never });
      host.emit(id, { case: "turnFailed", value: { code: 502, reason: "turn_failed", message: "the agent failed the turn: boom", retryable: false } as never });
      run.ended = true;
      return;
    case "agent-cancel":
      // codex on reject_once: the agent ends its own turn as "cancelled" (no cancel from Portico), after usage.
      started();
      host.emit(id, { case: "content", value: { text: "stopped" } as never });
      host.emit(id, { case: "usage", value: { promptTokens: 7n, completionTokens: 3n, totalTokens: 10n, cachedTokens: 5n } as never });
      host.emit(id, { case: "turnEnded", value: { stopReason: "cancelled" } as never });
      run.ended = true;
      return;
    case "end":
      started();
      host.emit(id, { case: "runEnded", value: { cancelled: true, deadline: false } as never });
      run.ended = true;
      return;
    case "busy":
      host.emit(id, { case: "rejected", value: { reason: "busy", message: "no capacity" } as never });
      run.ended = true;
      return;
    case "timeout":
      host.emit(id, { case: "rejected", value: { reason: "timeout", message: "agent did not start" } as never });
      run.ended = true;
      return;
    case "slow":
      started();
      host.emit(id, { case: "content", value: { text: "tick" } as never });
      return;
    case "nostart":
      return;
    case "flood": {
      started();
      const n = Number(arg ?? "10");
      for (let i = 0; i < n; i++) host.emit(id, { case: "content", value: { text: `c${i}` } as never });
      host.emit(id, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
      run.ended = true;
      return;
    }
    default:
      started();
      host.emit(id, { case: "content", value: { text: `echo: ${run.start.prompt}` } as never });
      host.emit(id, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
      run.ended = true;
  }
}

export function startFakeHost(opts: FakeHostOptions): FakeHost {
  const sessionManager = new Http2SessionManager(opts.coreUrl);
  const transport = createGrpcTransport({ baseUrl: opts.coreUrl, sessionManager });
  const client = createClient(InternLinkService, transport);
  const ac = new AbortController();
  const queue: AttachRequest[] = [];
  let wake: (() => void) | undefined;
  let silent = false;
  let done = false;
  const runs = opts.runs ?? new Map<string, FakeRun>();
  const push = (msg: AttachRequest["message"]) => {
    queue.push(create(AttachRequestSchema, { message: msg }));
    const w = wake;
    wake = undefined;
    w?.();
  };
  let head = 0;
  const outbox: AsyncIterable<AttachRequest> = {
    async *[Symbol.asyncIterator]() {
      while (!done) {
        if (head < queue.length) {
          const m = queue[head]!;
          queue[head++] = undefined as unknown as AttachRequest;
          if (head > 4096 && head * 2 > queue.length) {
            queue.splice(0, head);
            head = 0;
          }
          yield m;
          continue;
        }
        await new Promise<void>((r) => (wake = r));
      }
    },
  };
  let resolveWelcome!: (w: Welcome) => void;
  let rejectWelcome!: (e: unknown) => void;
  const welcome = new Promise<Welcome>((res, rej) => {
    resolveWelcome = res;
    rejectWelcome = rej;
  });
  welcome.catch(() => undefined);
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of [...waiters]) w();
  };

  const host: FakeHost = {
    welcome,
    runs,
    cancels: [],
    answers: [],
    received: [],
    emit(runId, event) {
      const run = runs.get(runId);
      const seq = run ? ++run.seq : 1;
      push({ case: "runEvent", value: { runId, seq: BigInt(seq), event } as never });
    },
    send: push,
    goSilent() {
      silent = true;
    },
    kill() {
      done = true;
      ac.abort();
      sessionManager.abort();
    },
    closed: undefined as unknown as Promise<void>,
    waitFor<T>(fn: () => T | undefined | false, timeoutMs = 5000): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const check = () => {
          const v = fn();
          if (v !== undefined && v !== false) {
            waiters.delete(check);
            clearTimeout(t);
            resolve(v as T);
          }
        };
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(new Error("fake host: waitFor timed out"));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };

  push({
    case: "hello",
    value: {
      hostVersion: "fake",
      agentName: "fake-agent",
      maxConcurrentRuns: opts.maxConcurrentRuns ?? 0,
      maxPausedRuns: opts.maxPausedRuns ?? 0,
      heldRuns: opts.heldRuns ?? [],
    } as never,
  });

  host.closed = (async () => {
    try {
      for await (const msg of client.attach(outbox, { signal: ac.signal, headers: { authorization: `Bearer ${opts.token}` } })) {
        host.received.push(msg);
        const m = msg.message;
        switch (m.case) {
          case "welcome":
            resolveWelcome(m.value);
            break;
          case "ping":
            if (!silent) push({ case: "pong", value: { nonce: m.value.nonce } as never });
            break;
          case "startRun": {
            const run: FakeRun = { start: m.value, seq: 0, ended: false };
            runs.set(m.value.runId, run);
            const handled = opts.onStart?.(run, host);
            if (!handled) defaultScript(run, host);
            break;
          }
          case "answer": {
            host.answers.push(m.value);
            const run = runs.get(m.value.runId);
            let outcome = opts.onAnswer?.(m.value, run, host);
            if (outcome === undefined) {
              if (!run || run.ended || run.pendingQuestion?.id !== m.value.interactionId) outcome = AnswerOutcome.NOT_PENDING;
              else if (m.value.answer !== "cancel" && !run.pendingQuestion.options.includes(m.value.answer)) outcome = AnswerOutcome.NOT_OFFERED;
              else outcome = AnswerOutcome.ACCEPTED;
            }
            push({ case: "answerResult", value: { runId: m.value.runId, interactionId: m.value.interactionId, outcome } as never });
            if (outcome === AnswerOutcome.ACCEPTED && run) {
              run.pendingQuestion = undefined;
              const id = run.start.runId;
              if (m.value.answer === "cancel") {
                host.emit(id, { case: "runEnded", value: { cancelled: true, deadline: false } as never });
                run.ended = true;
              } else if (!opts.onAnswer) {
                host.emit(id, { case: "content", value: { text: m.value.answer.startsWith("allow") ? "after" : "rejected" } as never });
                host.emit(id, { case: "usage", value: { promptTokens: 10n, completionTokens: 4n, totalTokens: 14n } as never });
                host.emit(id, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
                run.ended = true;
              }
            }
            break;
          }
          case "cancelRun": {
            host.cancels.push(m.value);
            const run = runs.get(m.value.runId);
            if (run && !run.ended) {
              run.ended = true;
              host.emit(m.value.runId, {
                case: "runEnded",
                value: { cancelled: true, deadline: m.value.reason === CancelReason.DEADLINE } as never,
              });
            }
            break;
          }
          default:
            break;
        }
        notify();
      }
    } catch (err) {
      rejectWelcome(err);
    } finally {
      done = true;
      sessionManager.abort();
      notify();
    }
  })();
  return host;
}
