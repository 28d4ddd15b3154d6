/**
 * The server-tool loop (docs/plugins.md, "Server tools"), run by the execute stage around its attempt loop:
 * each model call ("turn") goes through the attempt loop as any request does; the calls the model makes to
 * server tools are run here, their results appended (an assistant message with the calls, one `tool` message
 * per call), and the model is called again, until it answers without a server tool call or a bound stops it:
 *
 * - `max_uses` of a tool: past it, a call gets an error result (the model sees why);
 * - the operator's turn limit (PORTICO_SERVER_TOOLS_MAX_TURNS) and `stop_server_tools_when` (any condition,
 *   OR): when one fires after a turn's calls ran, one final turn is made with `tool_choice: "none"`; a server
 *   call the model still makes then is dropped from the answer.
 *
 * Calls to the caller's own function tools end the loop: a turn that has them is returned to the caller (with
 * `finish_reason: "tool_calls"` and only those calls), after its server calls ran. Usage is summed over every
 * turn (and `usage.server_tool_use` counts the calls). Streams: content streams as it comes, turn after turn;
 * tool-call deltas are held until the turn ends (server calls are never shown as calls); while tools run the
 * caller gets progress chunks with `choices: []` and a `server_tool_activity` object, which OpenAI clients skip.
 */
import type { Logger } from "pino";
import { ConnectError } from "@connectrpc/connect";
import { errorDetailOf, Reason } from "../../errors.js";
import { reasonFromWire, ruleOf } from "../../../contract/reasons.js";
import { costOf, usd } from "../../catalog/cost.js";
import { imagesOf } from "../pipeline/cost.js";
import type { CanonicalRequest, CanonicalResponse, StreamEvent, ToolCall, Usage } from "../model.js";
import { UpstreamError } from "../providers/index.js";
import type { Attempt, ChatCall, ChatOutcome, NestedCall } from "../pipeline/stage.js";
import { MAX_RECORDED_CALLS, type ServerToolSession } from "./session.js";

export interface Turns {
  /** One non-streamed model call through the attempt loop (its answer stamped). */
  complete(body: CanonicalRequest): Promise<CanonicalResponse>;
  /** One streamed model call through the attempt loop: its events once the first arrived (stamped, relayed). */
  stream(body: CanonicalRequest): Promise<AsyncIterable<StreamEvent>>;
}

type Message = Record<string, unknown>;

export function runServerToolLoop(call: ChatCall, s: ServerToolSession, turns: Turns, log: Logger): Promise<ChatOutcome> {
  return call.streamed ? streamLoop(call, s, turns, log) : completeLoop(call, s, turns, log);
}

/** The state shared by both loops. */
function loopState(call: ChatCall, s: ServerToolSession) {
  const messages: Message[] = [...(call.request.messages as Message[])];
  let usage: Usage | undefined;
  let costUsd = 0;
  /** Each turn's usage and the attempt that served it (each turn is priced at its own endpoint). */
  const perTurn: Array<{ usage: Usage; served: Attempt | undefined }> = [];
  let final = false;
  let turn = 0;
  return {
    messages,
    get usage() {
      return usage;
    },
    get final() {
      return final;
    },
    get turn() {
      return turn;
    },
    /** The body of the next turn. */
    nextBody(): CanonicalRequest {
      turn++;
      s.record.turns = turn;
      const choice = final ? "none" : turn === 1 ? s.firstChoice : s.laterChoice;
      // The loop's messages are built loosely (assistant turns and tool results as Records): a narrow cast, not a check.
      const body: CanonicalRequest = { ...call.request, messages: [...messages] as CanonicalRequest["messages"] };
      if (choice === undefined) delete body.tool_choice;
      else body.tool_choice = choice;
      return body;
    },
    addUsage(u: Usage | null | undefined) {
      if (!u) return;
      usage = sumUsage(usage, u);
      const served = call.attempts.find((a) => a.provider === call.track.provider && a.credentialId === call.track.credentialId && a.requestedModel === call.track.model);
      if (served?.endpoint) costUsd += usd(costOf(served.endpoint.pricing, u).total);
      const at = perTurn[turn - 1];
      if (at && at.served === served) at.usage = sumUsage(at.usage, u);
      else perTurn[turn - 1] = { usage: sumUsage(undefined, u), served };
    },
    /**
     * The answer's own usage: the last turn's, the usage the cost stage prices at the endpoint that served it (the
     * request's served attempt). Every earlier turn goes to `track.nested`, priced at the endpoint that served
     * that turn and paid by its credential, as the fusion panel's calls are: the cost stage and the record stage
     * add them to the answer's usage and cost, so the caller still sees the sum over every turn.
     */
    ownUsage(): Usage | undefined {
      const turns = perTurn.filter((t) => t !== undefined);
      if (turns.length === 0) return usage;
      for (const t of turns.slice(0, -1)) call.track.nested.push(turnCall(call, t.usage, t.served));
      return turns[turns.length - 1]!.usage;
    },
    /** After a turn whose server calls ran: whether the next turn is the final one (no tools). */
    checkStops(finishReason: string | null, ran: ToolCall[]) {
      if (final) return;
      for (const c of s.stops) {
        const fired =
          c.type === "step_count_is" ? turn >= c.step_count
          : c.type === "max_cost" ? costUsd >= c.max_cost_in_dollars
          : c.type === "max_tokens_used" ? (usage?.total_tokens ?? 0) >= c.max_tokens
          : c.type === "has_tool_call" ? ran.some((r) => r.function.name === c.tool_name || s.tools.get(r.function.name)?.type === c.tool_name)
          : finishReason === c.reason;
        if (fired) {
          final = true;
          s.record.stoppedBy = c.type;
          return;
        }
      }
      if (turn + 1 >= s.maxTurns) {
        final = true;
        s.record.stoppedBy = "max_turns";
      }
    },
  };
}

/** Runs a turn's server calls (in parallel) and appends the assistant message and the results. */
async function runCalls(call: ChatCall, s: ServerToolSession, state: ReturnType<typeof loopState>, assistant: Message, server: ToolCall[], log: Logger, progress?: (e: Record<string, unknown>) => void) {
  state.messages.push({ ...assistant, role: "assistant", tool_calls: server });
  const results = await Promise.all(server.map(async (tc) => {
    const tool = s.tools.get(tc.function.name)!;
    const used = (s.record.counts[tool.type] ?? 0) + 1;
    s.record.counts[tool.type] = used;
    progress?.({ call_id: tc.id, type: tool.type, name: tool.name, status: "running", arguments: tc.function.arguments });
    const started = performance.now();
    let ok = false;
    let content: string;
    let summary: string;
    if (tool.maxUses !== undefined && used > tool.maxUses) {
      content = JSON.stringify({ error: `max_uses (${tool.maxUses}) of ${tool.type} reached for this request` });
      summary = `max_uses (${tool.maxUses}) reached`;
    } else {
      let args: Record<string, unknown> = {};
      try {
        const parsed = JSON.parse(tc.function.arguments || "{}");
        if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
      } catch {
        /* the tool reports the missing argument */
      }
      try {
        const r = await tool.run(args, call.signal);
        ok = r.ok;
        content = r.content;
        summary = r.summary;
      } catch (err) {
        if (call.signal.aborted) throw err;
        log.warn({ err, tool: tool.type }, "server tool failed");
        content = JSON.stringify({ error: `${tool.type} failed` });
        summary = "failed";
      }
    }
    const ms = Math.round(performance.now() - started);
    progress?.({ call_id: tc.id, type: tool.type, name: tool.name, status: ok ? "completed" : "failed", summary, ms });
    return { message: { role: "tool", tool_call_id: tc.id, content }, rec: { type: tool.type, name: tool.name, ok, ms } };
  }));
  // Recorded in the order the model made the calls (they ran in parallel).
  for (const r of results) if (s.record.calls.length < MAX_RECORDED_CALLS) s.record.calls.push(r.rec);
  state.messages.push(...results.map((r) => r.message));
}

function split(s: ServerToolSession, calls: readonly ToolCall[]) {
  const server: ToolCall[] = [];
  const client: ToolCall[] = [];
  for (const c of calls) (s.tools.has(c.function?.name) ? server : client).push(c);
  return { server, client };
}

function serverToolUse(s: ServerToolSession): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [type, n] of Object.entries(s.record.counts)) {
    const kind = [...s.tools.values()].find((t) => t.type === type)?.kind ?? type;
    const key = `${kind === "experimental__search_models" ? "search_models" : kind}_requests`;
    out[key] = (out[key] ?? 0) + n;
  }
  return out;
}

/**
 * The answer's usage: `server_tool_use` counts Portico's server tool calls, and `web_search_requests` also the
 * searches the provider's native search ran on the last turn (earlier turns' are in `track.nested`, added by the
 * cost stage). Portico's own searches are noted on the track so that only the provider's are priced.
 */
function withServerToolUse(call: ChatCall, own: Usage, s: ServerToolSession): Usage {
  const counts = serverToolUse(s);
  const mine = counts.web_search_requests ?? 0;
  const native = own.server_tool_use?.web_search_requests ?? 0;
  call.track.porticoSearches = mine;
  return { ...own, server_tool_use: { ...counts, ...(mine + native > 0 ? { web_search_requests: mine + native } : {}) } } as Usage;
}

async function completeLoop(call: ChatCall, s: ServerToolSession, turns: Turns, log: Logger): Promise<ChatOutcome> {
  const state = loopState(call, s);
  const texts: string[] = [];
  for (;;) {
    const completion = await turns.complete(state.nextBody());
    state.addUsage(completion.usage);
    const choice = completion.choices[0];
    const message = choice?.message;
    if (typeof message?.content === "string" && message.content !== "") texts.push(message.content);
    const { server, client } = split(s, message?.tool_calls ?? []);
    if (server.length > 0 && !state.final) {
      const { tool_calls: _all, ...assistant } = message!;
      await runCalls(call, s, state, assistant, server, log);
      if (client.length === 0) {
        state.checkStops(choice!.finish_reason, server);
        continue;
      }
    }
    // The answer: the last turn, with the text of every turn, only the caller's tool calls, the usage summed.
    const finish = client.length > 0 ? "tool_calls" : choice?.finish_reason === "tool_calls" ? "stop" : (choice?.finish_reason ?? null);
    const out: CanonicalResponse = {
      ...completion,
      choices: choice ? [{
        ...choice,
        message: { ...choice.message, content: texts.length > 0 ? texts.join("") : client.length > 0 ? null : (message?.content ?? ""), ...(client.length > 0 ? { tool_calls: client } : {}) },
        finish_reason: finish,
      }] : [],
    };
    if (client.length === 0 && out.choices[0]) delete out.choices[0].message.tool_calls;
    const own = state.ownUsage();
    if (own) out.usage = withServerToolUse(call, own, s);
    call.track.usage = out.usage ?? null;
    call.track.finishReason = finish;
    call.track.status = "success";
    return { kind: "completion", completion: out };
  }
}

interface HeldCall {
  id: string;
  name: string;
  args: string;
}

async function streamLoop(call: ChatCall, s: ServerToolSession, turns: Turns, log: Logger): Promise<ChatOutcome> {
  const state = loopState(call, s);
  // The first turn before the outcome: an error before the first byte is the request's error.
  const first = await turns.stream(state.nextBody());
  return { kind: "stream", events: loopEvents(call, s, turns, state, first, log) };
}

async function* loopEvents(call: ChatCall, s: ServerToolSession, turns: Turns, state: ReturnType<typeof loopState>, first: AsyncIterable<StreamEvent>, log: Logger): AsyncGenerator<StreamEvent> {
  const { track } = call;
  let events: AsyncIterable<StreamEvent> | undefined = first;
  let lastFinish: string | null = null;
  const meta = () => ({ id: track.id, object: "chat.completion.chunk" as const, created: Math.floor(Date.now() / 1000), model: track.model ?? "", provider: track.provider ?? undefined });
  while (events) {
    const held = new Map<number, HeldCall>();
    // The turn's reasoning pieces, merged by index (text appended, signature and data kept): sent back with the
    // calls, as providers that sign their thinking (Anthropic) require on the next turn.
    const reasoning = new Map<number, Record<string, unknown>>();
    let content = "";
    let finish: string | null = null;
    for await (const ev of events) {
      if (ev.error) {
        yield ev;
        return;
      }
      if (ev.usage) state.addUsage(ev.usage);
      if (!ev.choices || ev.choices.length === 0) {
        if (ev.debug) yield ev;
        continue;
      }
      const c = ev.choices[0]!;
      const delta = c.delta ?? {};
      if (Array.isArray(delta.tool_calls)) {
        for (const t of delta.tool_calls as Array<{ index?: number; id?: string; function?: { name?: string; arguments?: string } }>) {
          const i = t.index ?? 0;
          const h = held.get(i) ?? { id: "", name: "", args: "" };
          if (t.id) h.id = t.id;
          if (t.function?.name) h.name += t.function.name;
          if (t.function?.arguments) h.args += t.function.arguments;
          held.set(i, h);
        }
      }
      if (Array.isArray(delta.reasoning_details)) {
        for (const d of delta.reasoning_details as Array<Record<string, unknown>>) {
          const i = typeof d.index === "number" ? d.index : 0;
          const piece = reasoning.get(i);
          if (!piece) reasoning.set(i, { ...d });
          else for (const [k, v] of Object.entries(d)) piece[k] = k === "text" && typeof v === "string" ? `${(piece.text as string | undefined) ?? ""}${v}` : v;
        }
      }
      if (c.finish_reason) finish = c.finish_reason;
      const { tool_calls: _tc, ...rest } = delta as Record<string, unknown>;
      const hasContent = Object.entries(rest).some(([k, v]) => k !== "role" && v !== undefined && v !== null && v !== "");
      if (typeof rest.content === "string") content += rest.content;
      if (hasContent || (state.turn === 1 && rest.role && !c.finish_reason)) {
        const { usage: _u, ...plain } = ev;
        yield { ...plain, choices: [{ ...c, delta: rest, finish_reason: null }] } as StreamEvent;
      }
    }
    const calls: ToolCall[] = [...held.entries()].sort((a, b) => a[0] - b[0]).map(([, h]) => ({ id: h.id, type: "function", function: { name: h.name, arguments: h.args } }));
    const { server, client } = split(s, calls);
    lastFinish = finish;
    events = undefined;
    if (server.length > 0 && !state.final) {
      const pending: Record<string, unknown>[] = [];
      let wake: (() => void) | undefined;
      const progress = (e: Record<string, unknown>) => {
        pending.push(e);
        wake?.();
      };
      let done = false;
      let failure: unknown;
      const details = [...reasoning.entries()].sort((a, b) => a[0] - b[0]).map(([, d]) => d);
      const assistant = { content: content === "" ? null : content, ...(details.length > 0 ? { reasoning_details: details } : {}) };
      const running = runCalls(call, s, state, assistant, server, log, progress).then(
        () => void (done = true),
        (err: unknown) => void ((failure = err), (done = true)),
      ).finally(() => wake?.());
      while (!done || pending.length > 0) {
        if (pending.length === 0) await new Promise<void>((r) => (wake = r));
        wake = undefined;
        while (pending.length > 0) yield { ...meta(), choices: [], server_tool_activity: { turn: state.turn, ...pending.shift()! } } as StreamEvent;
      }
      await running;
      if (failure) throw failure;
      if (client.length === 0) {
        state.checkStops(finish, server);
        try {
          events = await turns.stream(state.nextBody());
        } catch (err) {
          if (call.signal.aborted) throw err;
          // The attempt loop's error (upstream_failed, timeout, rate_limited) as the in-stream error chunk.
          const detail = err instanceof ConnectError ? errorDetailOf(err) : undefined;
          const reason = (detail && reasonFromWire(detail.reason, (err as ConnectError).code)) ?? Reason.UPSTREAM_FAILED;
          const status = err instanceof UpstreamError && err.status > 0 ? err.status : ruleOf(reason).status;
          const message = err instanceof ConnectError ? err.rawMessage : err instanceof Error ? err.message : "The provider failed";
          track.status = "error";
          track.errorCode = status;
          track.finishReason = "error";
          yield { ...meta(), choices: [{ index: 0, delta: {}, finish_reason: "error", native_finish_reason: null }], error: { reason, code: status, message } } as StreamEvent;
          return;
        }
        continue;
      }
    }
    // The end: the caller's own calls (whole, one delta), the finish, the usage summed.
    if (client.length > 0) {
      yield { ...meta(), choices: [{ index: 0, delta: { tool_calls: client.map((c, index) => ({ index, ...c })) }, finish_reason: null }] } as unknown as StreamEvent;
    }
    const finishReason = client.length > 0 ? "tool_calls" : lastFinish === "tool_calls" || lastFinish === null ? "stop" : lastFinish;
    yield { ...meta(), choices: [{ index: 0, delta: {}, finish_reason: finishReason, native_finish_reason: lastFinish }] } as unknown as StreamEvent;
    track.finishReason = finishReason;
    const own = state.ownUsage();
    if (own) {
      const usage = withServerToolUse(call, own, s);
      track.usage = usage;
      yield { ...meta(), choices: [], usage } as StreamEvent;
    }
  }
}

/** One earlier turn as a call made on the request's behalf: priced at its own endpoint (null when uncatalogued). */
function turnCall(call: ChatCall, usage: Usage, served: Attempt | undefined): NestedCall {
  let cost: NestedCall["cost"] = null;
  if (served?.endpoint) {
    const p = costOf(served.endpoint.pricing, usage, imagesOf(call.request));
    cost = { prompt: p.prompt + p.cacheRead + p.cacheWrite + p.request + p.image + p.webSearch, completion: p.completion, total: p.total };
  }
  return { usage, cost, paidBy: served?.credentialSource === "byok" ? "byok" : "platform" };
}

function sumUsage(a: Usage | undefined, b: Usage): Usage {
  if (!a) return { ...b, ...(b.prompt_tokens_details ? { prompt_tokens_details: { ...b.prompt_tokens_details } } : {}), ...(b.completion_tokens_details ? { completion_tokens_details: { ...b.completion_tokens_details } } : {}) };
  const n = (x: number | undefined, y: number | undefined) => (x ?? 0) + (y ?? 0);
  const out: Usage = {
    prompt_tokens: n(a.prompt_tokens, b.prompt_tokens),
    completion_tokens: n(a.completion_tokens, b.completion_tokens),
    total_tokens: n(a.total_tokens, b.total_tokens),
  };
  if (a.prompt_tokens_details || b.prompt_tokens_details) {
    out.prompt_tokens_details = {
      cached_tokens: n(a.prompt_tokens_details?.cached_tokens, b.prompt_tokens_details?.cached_tokens),
      ...(a.prompt_tokens_details?.cache_write_tokens !== undefined || b.prompt_tokens_details?.cache_write_tokens !== undefined
        ? { cache_write_tokens: n(a.prompt_tokens_details?.cache_write_tokens, b.prompt_tokens_details?.cache_write_tokens) } : {}),
    };
  }
  if (a.completion_tokens_details || b.completion_tokens_details) {
    out.completion_tokens_details = { reasoning_tokens: n(a.completion_tokens_details?.reasoning_tokens, b.completion_tokens_details?.reasoning_tokens) };
  }
  return out;
}
