/**
 * A coding agent's Anthropic Messages body, what Claude Code-like agents send on every turn: deterministic, a long
 * system prompt (≈ 9 kB), 20 tools with JSON schemas, and a tool_use / tool_result history (file contents, command
 * output) grown until the JSON text reaches the size asked for. Used by bench/dialect-body.ts (the split hop in
 * process) and bench/chat-hot-path.ts `--route messages` (whole requests against real processes).
 */

const words = "the of and to in is that for it as with on be by this are from at or an file function test value return error module path type string number config".split(" ");
/** Deterministic prose of about `n` characters. */
function prose(n: number, seed: number): string {
  let out = "";
  for (let i = seed; out.length < n; i++) out += (out ? " " : "") + words[(i * 7 + seed) % words.length];
  return out;
}
/** Deterministic source code of about `n` characters (lines, indentation, quotes). */
function code(n: number, seed: number): string {
  let out = "";
  for (let i = 0; out.length < n; i++) out += `${"  ".repeat(i % 3)}const ${words[(i + seed) % words.length]}_${i} = await load("${words[(i * 3 + seed) % words.length]}/${i}.ts", { strict: true });\n`;
  return out;
}

function tool(i: number) {
  return {
    name: `tool_${i}_${words[i % words.length]}`,
    description: prose(300 + (i % 5) * 60, i),
    input_schema: {
      type: "object",
      properties: {
        path: { type: "string", description: prose(80, i + 1) },
        pattern: { type: "string", description: prose(60, i + 2) },
        options: {
          type: "object",
          properties: {
            recursive: { type: "boolean", description: prose(40, i + 3) },
            limit: { type: "integer", minimum: 1, maximum: 1000, description: prose(40, i + 4) },
            mode: { type: "string", enum: ["read", "write", "append", "replace"] },
          },
          additionalProperties: false,
        },
        edits: { type: "array", items: { type: "object", properties: { old_string: { type: "string" }, new_string: { type: "string" } }, required: ["old_string", "new_string"] } },
      },
      required: ["path"],
      additionalProperties: false,
      $schema: "http://json-schema.org/draft-07/schema#",
    },
  };
}

/** The body, its history grown turn by turn until the JSON text reaches `targetBytes`. */
export function codingAgentBody(targetBytes: number, model = "anthropic/claude-sonnet-4"): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model,
    max_tokens: 32000,
    stream: false,
    system: [
      { type: "text", text: "You are an interactive CLI tool that helps users with software engineering tasks." },
      { type: "text", text: prose(9000, 1), cache_control: { type: "ephemeral" } },
    ],
    tools: Array.from({ length: 20 }, (_, i) => tool(i)),
    metadata: { user_id: "user_0123456789abcdef_account_fedcba9876543210_session_00000000-0000-4000-8000-000000000000" },
    messages: [] as unknown[],
  };
  const messages = body.messages as unknown[];
  for (let turn = 0; JSON.stringify(body).length < targetBytes; turn++) {
    const id = `toolu_01${String(turn).padStart(22, "0")}`;
    messages.push({ role: "user", content: turn === 0 ? [{ type: "text", text: prose(400, turn) }] : [{ type: "tool_result", tool_use_id: `toolu_01${String(turn - 1).padStart(22, "0")}`, content: turn % 2 ? code(1200, turn) : prose(500, turn) }] });
    messages.push({ role: "assistant", content: [{ type: "text", text: prose(160, turn + 5) }, { type: "tool_use", id, name: tool(turn % 20).name, input: { path: `src/${words[turn % words.length]}/${turn}.ts`, pattern: words[(turn + 3) % words.length], options: { recursive: turn % 2 === 0, limit: 200 } } }] });
  }
  messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_last", content: "ok" }, { type: "text", text: "Now run the tests.", cache_control: { type: "ephemeral" } }] });
  return body;
}
