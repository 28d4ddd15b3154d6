/**
 * Stage "content" without a server (src/core/chat/pipeline/content.ts), with the real content log on a real SQLite
 * database (src/core/chat/content-log.ts): off for a workspace that does not log content; otherwise the request as it
 * reached the stage and the answer (a completion, the assembled stream, the error of a failure, a stream the reader
 * left) are written sealed, with the attempts' provider keys redacted, and the answer goes on unchanged.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConnectError, Code } from "@connectrpc/connect";
import pino from "pino";
import { compose, newCall, type Attempt, type ChatCall, type ChatOutcome, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { createContentStage } from "../../../src/core/chat/pipeline/content.js";
import { createContentLog, type ContentLog } from "../../../src/core/chat/content-log.js";
import { Keyring } from "../../../src/core/byok/keyring.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest, StreamEvent } from "../../../src/core/chat/model.js";
import type { DatabaseHandle } from "../../../src/db/client.js";
import { freshSqlite } from "../../helpers/db.js";

const DAY_MS = 86_400_000;
const PROVIDER_KEY = "prov-key-0123456789-abcdefghij"; // not shaped like a well-known key: only the attempt's key list redacts it
const callerLogging = (days: number | null): Caller => ({
  keyId: "k1", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1", isManagement: false, internsProgramme: false,
  contentLogRetentionDays: days,
});
const completion = { id: "x", object: "chat.completion", created: 1, model: "m", choices: [{ index: 0, message: { role: "assistant", content: `the key is ${PROVIDER_KEY}` }, finish_reason: "stop" }] };
const chunk = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) =>
  ({ id: "x", object: "chat.completion.chunk", created: 1, model: "m", provider: "openai", choices: [{ index: 0, delta, finish_reason: finish }], ...extra }) as unknown as StreamEvent;
const streamed = [
  chunk({ role: "assistant", content: "Hel" }),
  chunk({ content: "lo", reasoning: "think" }),
  chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_", arguments: '{"city"' } }] }),
  chunk({ tool_calls: [{ index: 0, function: { name: "weather", arguments: ':"Paris"}' } }] }, "tool_calls"),
  chunk({}, null, { usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } }),
];

async function* source(events: StreamEvent[], fail?: Error): AsyncGenerator<StreamEvent> {
  for (const e of events) yield e;
  if (fail) throw fail;
}

describe("content stage", () => {
  let database: DatabaseHandle;
  let log: ContentLog;
  beforeAll(async () => {
    database = await freshSqlite();
    log = createContentLog({ db: database.db, keyring: new Keyring({ primaryId: "t", keys: new Map([["t", randomBytes(32)]]) }), logger: pino({ level: "silent" }) });
  });
  afterAll(async () => {
    await log?.close();
    await database?.close();
  });

  /**
   * Runs the stage for a caller whose workspace keeps content `days` days, over a rest of the chain that changes
   * the request (as the stages after it do), uses an attempt with PROVIDER_KEY, and answers with `answer`.
   */
  function run(days: number | null, answer: (call: ChatCall) => Promise<ChatOutcome>, signal = new AbortController().signal) {
    const rest: ChatStage = {
      name: "rest",
      run(call) {
        (call.request as Record<string, unknown>).model = "changed-after/the-stage";
        call.attempts.push({ call: { apiKey: PROVIDER_KEY } } as unknown as Attempt);
        return answer(call);
      },
    };
    const call = newCall(callerLogging(days), signal, false, { model: "openai/gpt-4o", messages: [{ role: "user", content: "hello there" }] } as unknown as CanonicalRequest);
    return { call, outcome: compose([createContentStage({ log }), rest])(call) };
  }
  /** What the log keeps of `id` (reading flushes what is queued first). */
  const kept = (id: string) => log.read(id, "o1");

  it("off for a workspace that does not log content: the answer goes on as it came, nothing is written", async () => {
    for (const days of [null, 0]) {
      const outcome: ChatOutcome = { kind: "completion", completion: completion as never };
      const { call, outcome: got } = run(days, async () => outcome);
      expect(await got).toBe(outcome);
      expect(await kept(call.track.id)).toBeNull();
    }
    const stream: ChatOutcome = { kind: "stream", events: source(streamed) };
    const { call, outcome: got } = run(null, async () => stream);
    expect(await got).toBe(stream);
    expect(await database.db.generationContent.count({ where: { id: call.track.id } })).toBe(0);
  });

  it("a completion: the request as it reached the stage and the answer, sealed, the attempt's key redacted, kept `days` days", async () => {
    const outcome: ChatOutcome = { kind: "completion", completion: completion as never };
    const { call, outcome: got } = run(7, async () => outcome);
    expect(await got).toBe(outcome);
    const c = (await kept(call.track.id))!;
    expect(c.request).toEqual({ model: "openai/gpt-4o", messages: [{ role: "user", content: "hello there" }] });
    expect(c.response).toEqual({ ...completion, choices: [{ ...completion.choices[0], message: { role: "assistant", content: "the key is [redacted]" } }] });
    expect(c.expiresAt.getTime() - c.createdAt.getTime()).toBe(7 * DAY_MS);
    const row = (await database.db.generationContent.findUnique({ where: { id: call.track.id } }))!;
    expect(row).toMatchObject({ organizationId: "o1", workspaceId: "w1", keyId: "t" });
    const raw = Buffer.from(row.ciphertext);
    expect(raw.includes(Buffer.from("hello there"))).toBe(false);
    expect(raw.includes(Buffer.from(PROVIDER_KEY))).toBe(false);
  });

  it("a stream: every event passed on unchanged, the assembled answer written once it ends", async () => {
    const { call, outcome: got } = run(3, async () => ({ kind: "stream", events: source(streamed) }));
    const out = await got;
    expect(out.kind).toBe("stream");
    const seen: StreamEvent[] = [];
    for await (const e of (out as { events: AsyncIterable<StreamEvent> }).events) seen.push(e);
    expect(seen).toEqual(streamed);
    const c = (await kept(call.track.id))!;
    expect(c.response).toEqual({
      id: call.track.id,
      object: "chat.completion",
      streamed: true,
      model: "m",
      provider: "openai",
      choices: [{
        index: 0,
        message: { role: "assistant", content: "Hello", reasoning: "think", tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
        finish_reason: "tool_calls",
      }],
      usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
    });
    expect(c.request).toMatchObject({ model: "openai/gpt-4o" });
  });

  it("a stream is written only once it ends; one the reader leaves is written as cancelled", async () => {
    const { call, outcome: got } = run(3, async () => ({ kind: "stream", events: source(streamed) }));
    const it = (await got as { events: AsyncIterable<StreamEvent> }).events[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual(streamed[0]);
    expect(await kept(call.track.id)).toBeNull(); // the log's queue is flushed by the read: nothing recorded yet
    await it.return!();
    const c = (await kept(call.track.id))!;
    expect(c.response).toMatchObject({ streamed: true, cancelled: true, choices: [{ message: { content: "Hel" }, finish_reason: null }] });
  });

  it("a stream that fails: the error goes on to the reader, the assembled part is written with the error", async () => {
    const broken = new ConnectError("upstream went away", Code.Unavailable);
    const { call, outcome: got } = run(3, async () => ({ kind: "stream", events: source(streamed.slice(0, 2), broken) }));
    const events = (await got as { events: AsyncIterable<StreamEvent> }).events;
    const read: StreamEvent[] = [];
    await expect((async () => { for await (const e of events) read.push(e); })()).rejects.toBe(broken);
    expect(read).toHaveLength(2);
    const c = (await kept(call.track.id))!;
    expect(c.response).toMatchObject({ streamed: true, choices: [{ message: { content: "Hello" } }], error: { code: Code.Unavailable, message: "upstream went away" } });
  });

  it("a failure before any answer: the same error is thrown on, and written (a ConnectError's code and message, else only that it failed)", async () => {
    const refused = new ConnectError("no such model", Code.NotFound);
    const a = run(3, async () => {
      throw refused;
    });
    await expect(a.outcome).rejects.toBe(refused);
    expect((await kept(a.call.track.id))!.response).toEqual({ error: { code: Code.NotFound, message: "no such model" } });

    const bug = new Error(`internal detail with ${PROVIDER_KEY}`);
    const b = run(3, async () => {
      throw bug;
    });
    await expect(b.outcome).rejects.toBe(bug);
    expect((await kept(b.call.track.id))!.response).toEqual({ error: { message: "internal error" } });

    const caller = new AbortController();
    const c = run(3, async () => {
      caller.abort();
      throw new Error("aborted");
    }, caller.signal);
    await expect(c.outcome).rejects.toThrow("aborted");
    expect((await kept(c.call.track.id))!.response).toEqual({ error: { cancelled: true } });
  });
});
