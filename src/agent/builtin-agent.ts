/**
 * Portico's built-in ACP agent. It runs the shell commands written in the prompt as `$ <command>`
 * lines through client terminals — so the host's permission flow and sandbox apply — streams their
 * output as content and describes its plan as reasoning. Anything else goes to a model when the host
 * gave it one (the ACP `gateway` auth method: Portico's chat completions, streamed back as message
 * chunks, the run's model from the prompt's `_meta.portico.model`); without one it answers with a short
 * help text. Usage: the model's reported tokens, else words counted as tokens.
 */
import * as acp from "@agentclientprotocol/sdk";
import { EventSourceParserStream } from "eventsource-parser/stream";

export const BUILTIN_AGENT_NAME = "portico-builtin";

export const BUILTIN_HELP = [
  "I am Portico's built-in intern. I run shell commands on the machine that hosts me.",
  "Write each command on its own line starting with `$ `, for example:",
  "",
  "$ ls -la",
  "$ echo hello > notes.txt",
  "",
  "In manual mode you approve each command, and only the command you allow runs outside the sandbox; in self-drive I run them directly.",
].join("\n");

/** Commands in a prompt: the text after `$ ` on each line that starts with it. */
export function parseCommands(prompt: string): string[] {
  const out: string[] = [];
  for (const line of prompt.split(/\r?\n/)) {
    const m = /^\s*\$\s+(.+?)\s*$/.exec(line);
    if (m?.[1]) out.push(m[1]);
  }
  return out;
}

/** What the host handed over with `authenticate {methodId: "gateway"}`: where model calls go and with which headers. */
export interface BuiltinGateway {
  /** Stands for Portico's `/api`: chat completions are at `<baseUrl>/v1/chat/completions`. */
  baseUrl: string;
  headers: Record<string, string>;
}

/** Reads `_meta.gateway` of an authenticate request; throws invalid params naming what is wrong. */
function gatewayFromAuth(params: acp.AuthenticateRequest): BuiltinGateway {
  const g = (params._meta as { gateway?: unknown } | null | undefined)?.gateway as { baseUrl?: unknown; headers?: unknown } | undefined;
  if (!g || typeof g !== "object") throw acp.RequestError.invalidParams({ field: "_meta.gateway" }, "the gateway auth method needs _meta.gateway {baseUrl, headers}");
  if (typeof g.baseUrl !== "string" || !/^https?:\/\//.test(g.baseUrl)) throw acp.RequestError.invalidParams({ field: "_meta.gateway.baseUrl" }, "_meta.gateway.baseUrl must be an http(s) URL");
  const headers: Record<string, string> = {};
  if (g.headers !== undefined) {
    if (typeof g.headers !== "object" || g.headers === null) throw acp.RequestError.invalidParams({ field: "_meta.gateway.headers" }, "_meta.gateway.headers must be an object of strings");
    for (const [k, v] of Object.entries(g.headers)) {
      if (typeof v !== "string") throw acp.RequestError.invalidParams({ field: "_meta.gateway.headers" }, "_meta.gateway.headers must be an object of strings");
      headers[k] = v;
    }
  }
  return { baseUrl: g.baseUrl.replace(/\/+$/, ""), headers };
}

interface ChatMessage {
  role: "user" | "assistant";
  content: string;
}

interface ChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

/** The error message of a non-2xx answer (Portico's envelope `{error: {message}}`), clipped. */
async function errorText(res: Response): Promise<string> {
  const body = await res.text().catch(() => "");
  try {
    const msg = (JSON.parse(body) as { error?: { message?: unknown } }).error?.message;
    if (typeof msg === "string" && msg) return msg.slice(0, 500);
  } catch {
    // not JSON
  }
  return body.slice(0, 200) || res.statusText;
}

/**
 * One streamed chat completions call: sends each content delta to `onText` (reasoning deltas to
 * `onReasoning`) and resolves with the whole answer and the usage of the final chunk.
 */
export async function streamChat(
  gateway: BuiltinGateway,
  body: { model: string; messages: ChatMessage[] },
  on: { text: (t: string) => Promise<void>; reasoning: (t: string) => Promise<void> },
  signal: AbortSignal,
): Promise<{ text: string; usage: ChatUsage | undefined }> {
  const res = await fetch(`${gateway.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { ...gateway.headers, "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  if (!res.ok || !res.body) {
    throw acp.RequestError.internalError({ status: res.status }, `the model call failed (${res.status}): ${await errorText(res)}`);
  }
  let text = "";
  let usage: ChatUsage | undefined;
  const events = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  for await (const ev of events) {
    if (ev.data === "[DONE]") break;
    let chunk: { choices?: Array<{ delta?: { content?: unknown; reasoning?: unknown; reasoning_content?: unknown } }>; usage?: ChatUsage | null; error?: { message?: unknown } };
    try {
      chunk = JSON.parse(ev.data) as typeof chunk;
    } catch {
      continue;
    }
    if (chunk.error) throw acp.RequestError.internalError({}, `the model stream failed: ${typeof chunk.error.message === "string" ? chunk.error.message : "error"}`);
    if (chunk.usage) usage = chunk.usage;
    const delta = chunk.choices?.[0]?.delta;
    const reasoning = delta?.reasoning ?? delta?.reasoning_content;
    if (typeof reasoning === "string" && reasoning) await on.reasoning(reasoning);
    if (typeof delta?.content === "string" && delta.content) {
      text += delta.content;
      await on.text(delta.content);
    }
  }
  return { text, usage };
}

function words(text: string): number {
  const m = text.match(/\S+/g);
  return m ? m.length : 0;
}

const POLL_MS = 200;
/** Messages (user + assistant) of earlier turns a model call carries. */
const MAX_HISTORY_MESSAGES = 40;

/** Builds the built-in agent app (connect it to stdio in builtin-main.ts, or in-process). */
export function createBuiltinAgent(opts: { version?: string } = {}): acp.AgentApp {
  let counter = 0;
  const sessions = new Map<string, { cwd: string; abort?: AbortController | undefined; history: ChatMessage[] }>();
  let terminalOffered = false;
  let gateway: BuiltinGateway | undefined;

  return acp
    .agent({ name: BUILTIN_AGENT_NAME })
    .onRequest(acp.methods.agent.initialize, ({ params }) => {
      terminalOffered = params.clientCapabilities?.terminal === true;
      return {
        protocolVersion: acp.PROTOCOL_VERSION,
        agentCapabilities: { loadSession: false, promptCapabilities: {} },
        agentInfo: { name: BUILTIN_AGENT_NAME, title: "Portico built-in agent", version: opts.version ?? "1.0.0" },
        // Same shape as gemini-cli's: the client passes a base URL and headers in authenticate's `_meta.gateway`.
        authMethods: [
          {
            id: "gateway",
            name: "Portico model gateway",
            description: "Model calls go to Portico's chat completions at <baseUrl>/v1/chat/completions with the given headers",
            _meta: { gateway: { protocol: "openai", restartRequired: "false" } },
          },
        ],
      };
    })
    .onRequest(acp.methods.agent.authenticate, ({ params }) => {
      if (params.methodId !== "gateway") throw acp.RequestError.invalidParams({ methodId: params.methodId }, `unknown auth method "${params.methodId}" (offered: gateway)`);
      gateway = gatewayFromAuth(params);
      return {};
    })
    .onRequest(acp.methods.agent.session.new, ({ params }) => {
      const sessionId = `builtin-${process.pid}-${++counter}`;
      sessions.set(sessionId, { cwd: params.cwd, history: [] });
      return { sessionId };
    })
    .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
      sessions.get(params.sessionId)?.abort?.abort();
    })
    .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
      const session = sessions.get(params.sessionId);
      if (!session) throw acp.RequestError.sessionNotFound(params.sessionId);
      const sessionId = params.sessionId;
      const ac = new AbortController();
      session.abort = ac;
      const signal = ac.signal;
      const text = params.prompt.map((b) => (b.type === "text" ? b.text : "")).join("\n");
      let outputWords = 0;
      const say = async (t: string, kind: "agent_message_chunk" | "agent_thought_chunk" = "agent_message_chunk"): Promise<void> => {
        if (!t) return;
        if (kind === "agent_message_chunk") outputWords += words(t);
        await client.notify(acp.methods.client.session.update, { sessionId, update: { sessionUpdate: kind, content: { type: "text", text: t } } });
      };
      const update = (u: acp.SessionUpdate): Promise<void> => client.notify(acp.methods.client.session.update, { sessionId, update: u });
      const finish = (stopReason: acp.StopReason, modelUsage?: ChatUsage): acp.PromptResponse => {
        if (modelUsage) {
          const inputTokens = modelUsage.prompt_tokens ?? 0;
          const outputTokens = modelUsage.completion_tokens ?? 0;
          const cached = modelUsage.prompt_tokens_details?.cached_tokens;
          return {
            stopReason,
            usage: { inputTokens, outputTokens, totalTokens: modelUsage.total_tokens ?? inputTokens + outputTokens, ...(cached ? { cachedReadTokens: cached } : {}) },
          } as acp.PromptResponse;
        }
        const inputTokens = words(text);
        return { stopReason, usage: { inputTokens, outputTokens: outputWords, totalTokens: inputTokens + outputWords } } as acp.PromptResponse;
      };
      try {
        const commands = parseCommands(text);
        if (commands.length === 0) {
          const model = (params._meta as { portico?: { model?: unknown } } | null | undefined)?.portico?.model;
          if (!gateway || typeof model !== "string" || !model) {
            await say(BUILTIN_HELP);
            return finish("end_turn");
          }
          const messages: ChatMessage[] = [...session.history, { role: "user", content: text }];
          let answer;
          try {
            answer = await streamChat(gateway, { model, messages }, { text: (t) => say(t), reasoning: (t) => say(t, "agent_thought_chunk") }, signal);
          } catch (err) {
            if (signal.aborted) return finish("cancelled");
            if (err instanceof acp.RequestError) throw err;
            throw acp.RequestError.internalError({}, `the model call failed: ${(err as Error).message}`);
          }
          session.history.push({ role: "user", content: text }, { role: "assistant", content: answer.text });
          // The conversation sent with each call: the latest exchanges only.
          if (session.history.length > MAX_HISTORY_MESSAGES) session.history.splice(0, session.history.length - MAX_HISTORY_MESSAGES);
          return finish("end_turn", answer.usage);
        }
        const plan = commands.map((c, i) => `${i + 1}. \`${c}\``).join("\n");
        await say(`Plan: run ${commands.length} command${commands.length === 1 ? "" : "s"} in the session's working folder:\n${plan}\n`, "agent_thought_chunk");
        if (!terminalOffered) {
          await say("This client does not offer terminals, so I cannot run commands here.");
          return finish("end_turn");
        }
        for (const [i, command] of commands.entries()) {
          if (signal.aborted) return finish("cancelled");
          const toolCallId = `cmd-${++counter}-${i + 1}`;
          await update({ sessionUpdate: "tool_call", toolCallId, title: command, kind: "execute", status: "pending", rawInput: { command } });
          const answer = await client.request(acp.methods.client.session.requestPermission, {
            sessionId,
            toolCall: { toolCallId, title: command, kind: "execute", status: "pending", rawInput: { command } },
            options: [
              { optionId: "allow", name: "Allow", kind: "allow_once" },
              { optionId: "allow-always", name: "Always allow", kind: "allow_always" },
              { optionId: "reject", name: "Reject", kind: "reject_once" },
            ],
          });
          if (answer.outcome.outcome === "cancelled" || signal.aborted) return finish("cancelled");
          if (answer.outcome.optionId === "reject") {
            await update({ sessionUpdate: "tool_call_update", toolCallId, status: "failed" });
            await say(`Skipped \`${command}\`: not allowed.\n`);
            continue;
          }
          await say(`$ ${command}\n`);
          await update({ sessionUpdate: "tool_call_update", toolCallId, status: "in_progress" });
          let term: acp.TerminalHandle;
          try {
            term = await client.createTerminal({ sessionId, command, args: [], cwd: session.cwd, outputByteLimit: 256 * 1024 });
          } catch (err) {
            await update({ sessionUpdate: "tool_call_update", toolCallId, status: "failed" });
            await say(`Could not run \`${command}\`: ${(err as Error).message}\n`);
            continue;
          }
          let shown = 0;
          let truncatedNoted = false;
          const flush = async (): Promise<void> => {
            const out = await term.currentOutput();
            if (out.truncated) {
              if (!truncatedNoted) {
                truncatedNoted = true;
                await say("…(output truncated)\n");
              }
              return;
            }
            if (out.output.length > shown) {
              await say(out.output.slice(shown));
              shown = out.output.length;
            }
          };
          let exit: acp.WaitForTerminalExitResponse | undefined;
          const exited = term.waitForExit().then((e) => (exit = e));
          const aborted = new Promise((r) => signal.addEventListener("abort", r, { once: true }));
          while (!exit && !signal.aborted) {
            await Promise.race([exited, new Promise((r) => setTimeout(r, POLL_MS)), aborted]);
            if (!exit && !signal.aborted) await flush();
          }
          if (signal.aborted && !exit) {
            await term.kill().catch(() => {});
            await term.release().catch(() => {});
            return finish("cancelled");
          }
          await flush();
          const final = await term.currentOutput();
          if (final.truncated && !truncatedNoted) await say(`…(output truncated)\n${final.output}`);
          await term.release().catch(() => {});
          const code = exit?.exitCode ?? null;
          const status = code === 0 ? "completed" : "failed";
          await update({ sessionUpdate: "tool_call_update", toolCallId, status });
          const needsNewline = shown > 0 && !final.output.endsWith("\n");
          await say(`${needsNewline ? "\n" : ""}[exit ${code ?? exit?.signal ?? "?"}]\n`);
        }
        return finish("end_turn");
      } finally {
        if (session.abort === ac) session.abort = undefined;
      }
    });
}
