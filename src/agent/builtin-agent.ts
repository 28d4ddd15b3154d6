/**
 * Portico's built-in ACP agent: no model, no network. It runs the shell commands written in the
 * prompt as `$ <command>` lines through client terminals — so the host's permission flow and
 * sandbox apply — streams their output as content, describes its plan as reasoning, answers
 * anything else with a short help text, and reports usage (words counted as tokens).
 */
import * as acp from "@agentclientprotocol/sdk";

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

function words(text: string): number {
  const m = text.match(/\S+/g);
  return m ? m.length : 0;
}

const POLL_MS = 200;

/** Builds the built-in agent app (connect it to stdio in builtin-main.ts, or in-process). */
export function createBuiltinAgent(opts: { version?: string } = {}): acp.AgentApp {
  let counter = 0;
  const sessions = new Map<string, { cwd: string; abort?: AbortController | undefined }>();
  let terminalOffered = false;

  return acp
    .agent({ name: BUILTIN_AGENT_NAME })
    .onRequest(acp.methods.agent.initialize, ({ params }) => {
      terminalOffered = params.clientCapabilities?.terminal === true;
      return {
        protocolVersion: acp.PROTOCOL_VERSION,
        agentCapabilities: { loadSession: false, promptCapabilities: {} },
        agentInfo: { name: BUILTIN_AGENT_NAME, title: "Portico built-in agent", version: opts.version ?? "1.0.0" },
      };
    })
    .onRequest(acp.methods.agent.session.new, ({ params }) => {
      const sessionId = `builtin-${process.pid}-${++counter}`;
      sessions.set(sessionId, { cwd: params.cwd });
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
      const finish = (stopReason: acp.StopReason): acp.PromptResponse => {
        const inputTokens = words(text);
        return { stopReason, usage: { inputTokens, outputTokens: outputWords, totalTokens: inputTokens + outputWords } } as acp.PromptResponse;
      };
      try {
        const commands = parseCommands(text);
        if (commands.length === 0) {
          await say(BUILTIN_HELP);
          return finish("end_turn");
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
