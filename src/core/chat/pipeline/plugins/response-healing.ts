/**
 * Plugin "response-healing" (docs/plugins.md): when the request asks for JSON (`response_format` json_object or
 * json_schema), the answer's text is turned into the JSON asked for (json-heal.ts: cut out of a code fence or
 * prose, repaired, checked against the schema). Non-streamed answers are healed in place. Streams: the answer's
 * content is held (every other part of each chunk — role, reasoning, tool calls — passes at once), healed when
 * the choice finishes (or the stream ends), sent as one content chunk, then the finish chunk and the usage
 * chunk as the provider sent them. The cost is time to first content: the whole answer's generation time
 * (`held_ms` on the report). A stream that fails gets its held content unhealed, then the error chunk.
 *
 * The report: `healed` (the text was changed), `valid` (it is JSON of the asked kind and matches the schema),
 * `actions` ("extracted", "repaired"), `errors` (schema paths and rules, never values), `held_ms` (streams).
 * An answer that cannot be repaired is returned as the model wrote it (`healed: false, valid: false`).
 */
import type { CanonicalRequest, StreamEvent } from "../../model.js";
import type { ChatCall, ChatOutcome } from "../stage.js";
import { createSchemaChecker, healJson, type HealResult, type JsonTarget, type SchemaChecker } from "./json-heal.js";
import type { Plugin, PluginReport, PluginRun } from "./types.js";

/** What the request's `response_format` asks for; undefined when it asks for no JSON. */
export function jsonTargetOf(body: Readonly<CanonicalRequest>): JsonTarget | undefined {
  const rf = body.response_format;
  if (rf?.type === "json_object") return { kind: "object" };
  if (rf?.type === "json_schema") {
    const schema = rf.json_schema?.schema;
    return typeof schema === "object" && schema !== null && !Array.isArray(schema) ? { kind: "schema", schema: schema as Record<string, unknown> } : { kind: "object" };
  }
  return undefined;
}

/** Adds one choice's result to the report: healed if any was, valid if all are. */
function note(report: PluginReport, r: HealResult): void {
  report.healed = report.healed === true || r.healed;
  report.valid = report.valid !== false && r.valid;
  const actions = new Set([...((report.actions as string[] | undefined) ?? []), ...r.actions]);
  report.actions = [...actions];
  if (r.errors && report.errors === undefined) report.errors = r.errors;
}

export function createResponseHealingPlugin(opts: { checker?: SchemaChecker } = {}): Plugin {
  const checker = opts.checker ?? createSchemaChecker();
  const targets = new WeakMap<ChatCall, JsonTarget>();

  function complete(run: PluginRun, target: JsonTarget, outcome: Extract<ChatOutcome, { kind: "completion" }>): ChatOutcome {
    const c = outcome.completion;
    let changed = false;
    const choices = c.choices.map((choice) => {
      const text = choice.message.content;
      if (typeof text !== "string") return choice;
      const r = healJson(text, target, checker);
      note(run.report, r);
      if (!r.healed) return choice;
      changed = true;
      return { ...choice, message: { ...choice.message, content: r.text } };
    });
    if (run.report.healed === undefined) run.report.skipped = "the answer has no text";
    return changed ? { kind: "completion", completion: { ...c, choices } } : outcome;
  }

  async function* stream(run: PluginRun, target: JsonTarget, events: AsyncIterable<StreamEvent>): AsyncGenerator<StreamEvent> {
    const held = new Map<number, string>();
    let heldSince: number | undefined;
    let flushed = false;
    let template: StreamEvent | undefined;
    /** One chunk with every held choice's text, healed (or as written when the stream failed). */
    const flush = (base: StreamEvent, failed: boolean): StreamEvent | undefined => {
      flushed = true;
      if (heldSince !== undefined) run.report.held_ms = Math.round(performance.now() - heldSince);
      if (held.size === 0) {
        run.report.skipped = "the answer has no text";
        return undefined;
      }
      const choices = [...held].map(([index, text]) => {
        let content = text;
        if (failed) {
          run.report.healed = false;
          run.report.valid = false;
          run.report.errors = ["the stream failed: the held text was passed on unhealed"];
        } else {
          const r = healJson(text, target, checker);
          note(run.report, r);
          content = r.text;
        }
        return { index, delta: { content }, finish_reason: null };
      });
      const { usage: _u, error: _e, debug: _d, start_usage: _s, ...head } = base;
      return { ...head, choices };
    };
    for await (const event of events) {
      if (flushed) {
        yield event;
        continue;
      }
      template ??= event;
      let finishing = event.error !== undefined;
      let out: StreamEvent = event;
      if (event.choices.some((ch) => typeof ch.delta?.content === "string" && ch.delta.content !== "")) {
        heldSince ??= performance.now();
        const choices = [];
        for (const ch of event.choices) {
          const text = ch.delta?.content;
          if (typeof text !== "string" || text === "") {
            choices.push(ch);
            continue;
          }
          held.set(ch.index, (held.get(ch.index) ?? "") + text);
          const { content: _c, ...delta } = ch.delta;
          // A chunk that carried only text is held whole; one that carries more passes without its text.
          if (Object.keys(delta).length > 0 || ch.finish_reason) choices.push({ ...ch, delta });
        }
        out = { ...event, choices };
      }
      if (event.choices.some((ch) => ch.finish_reason)) finishing = true;
      if (finishing) {
        const healed = flush(event, event.error !== undefined);
        if (healed) yield healed;
      }
      // A chunk whose every choice carried only text is held whole (a usage chunk, with no choices, passes).
      if (out !== event && out.choices.length === 0 && !out.usage && !out.error) continue;
      yield out;
    }
    if (!flushed && template) {
      const healed = flush(template, false);
      if (healed) yield healed;
    }
  }

  return {
    id: "response-healing",
    order: 30,
    before(call, run) {
      const target = jsonTargetOf(call.request);
      if (target) targets.set(call, target);
      else run.report.skipped = "response_format asks for no JSON (json_object or json_schema)";
    },
    after(call, run, outcome) {
      const target = targets.get(call);
      if (!target) return outcome;
      if (outcome.kind === "completion") return complete(run, target, outcome);
      return { kind: "stream", events: stream(run, target, outcome.events) };
    },
  };
}
