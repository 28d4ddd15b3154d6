/**
 * The non-streamed answer passed through (bench/lib/completion-passthrough.ts) against today's encode, per answer, in
 * this process (issue 24, "serve ≤ 2.14× the bare relay"). Both paths parse the upstream's text (the stages read the
 * canonical object); today's then writes `JSON.stringify` of the answer, the pass-through scans the text once for
 * its canonical form (after the parse) and splices `id`, `provider`, each choice's `native_finish_reason` and the
 * priced `usage` into it. Also timed: the parse alone, the encode alone, the scan and the splice alone, and a bare
 * `charCodeAt` loop over the text (the floor of any check of every character written in JavaScript), one native
 * regular expression of the canonical tokens (a floor of a check done by the regex engine: it neither counts keys
 * nor finds the spliced fields), and, for the `small` answer only, a hand-written template of that answer's exact
 * form (one regular expression with the variable tokens captured, the object built from the captures): the ceiling
 * of a pass-through that would learn each upstream's form and skip the parse too (not built).
 *
 * Answers: `small` (the hot-path bench's fake answer, 425 B), `openai` (OpenAI's current shape: annotations,
 * service_tier, four usage details, ≈ 700 B), `long` (a 2.4 kB content).
 *
 *   node bin/run-ts.mjs bench/completion-passthrough.ts [--n 200000] [--rounds 5]
 */
import { loadavg } from "node:os";
import { completionJson, scanCompletion } from "./lib/completion-passthrough.js";
import { copyOf } from "../src/lib/copy.js";
import { flag } from "./lib/args.js";

const N = Number(flag("n") ?? 200_000);
const ROUNDS = Number(flag("rounds") ?? 5);

const small = (content: string) => ({
  id: "chatcmpl-fake1",
  object: "chat.completion",
  created: 1_700_000_000,
  model: "llama-3.3-70b",
  system_fingerprint: "fp_fake",
  choices: [{ index: 0, message: { role: "assistant", content, refusal: null }, logprobs: null, finish_reason: "stop" }],
  usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } },
});
const openai = {
  id: "chatcmpl-CHt2eZt7Xq0sLk3v9aQm1pYb2WcDe",
  object: "chat.completion",
  created: 1_764_268_800,
  model: "gpt-4o-mini-2024-07-18",
  choices: [{ index: 0, message: { role: "assistant", content: "Hello! How can I help you today?", refusal: null, annotations: [] }, logprobs: null, finish_reason: "stop" }],
  usage: {
    prompt_tokens: 19,
    completion_tokens: 9,
    total_tokens: 28,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  },
  service_tier: "default",
  system_fingerprint: "fp_560af6e559",
};
const answers: Record<string, string> = {
  small: JSON.stringify(small("Hello, world!")),
  openai: JSON.stringify(openai),
  long: JSON.stringify(small("Lorem ipsum dolor sit amet, consectetur adipiscing elit; “quoted” — ünïcode.\n".repeat(26))),
};

/** What the adapter, the execute stage's stamp and the cost stage do to the parse (src/core/chat/pipeline). */
function pipeline(value: Record<string, unknown>): Record<string, unknown> {
  for (const choice of value.choices as Array<Record<string, unknown>>) {
    if (choice.native_finish_reason === undefined) choice.native_finish_reason = choice.finish_reason;
  }
  value.id = "gen-1764268800-Wq3ZkT0pY8bN2vRcX4aM";
  value.provider = "groq";
  const priced = copyOf(value.usage as Record<string, unknown>);
  priced.cost = 0.0000123;
  priced.is_byok = true;
  priced.cost_details = { upstream_inference_cost: 0.0000123, upstream_inference_prompt_cost: 0.00001, upstream_inference_completions_cost: 0.0000023 };
  return { ...value, usage: priced };
}

let sink = 0;
function time(f: () => number): number {
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < N; i++) sink += f();
    best = Math.min(best, Number(process.hrtime.bigint() - t) / N);
  }
  return best;
}

/**
 * The text's tokens in canonical form, as one native regular expression (no count of keys, no positions: a floor of
 * the check, not a check): strings as JSON.stringify escapes them, integers of ≤ 15 digits, literals, punctuation.
 */
const STR = String.raw`"[^"\\\x00-\x1f\ud800-\udfff]*(?:(?:\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f])|[\ud800-\udbff][\udc00-\udfff])[^"\\\x00-\x1f\ud800-\udfff]*)*"`;
const TOKENS = new RegExp(String.raw`^(?:${STR}|-?(?:[1-9]\d{0,14}|0)(?![\d.eE])|true|false|null|[{}\[\],:])*$`);

function charLoop(t: string): number {
  let n = 0;
  for (let i = 0; i < t.length; i++) if (t.charCodeAt(i) === 0x22) n++;
  return n;
}

const load = loadavg()[0]!.toFixed(2);
console.log(`${N} answers × best of ${ROUNDS} rounds; node ${process.version}; load ${load}\n`);
console.log("| answer | bytes | parse | encode (JSON.stringify) | of which the priced usage | scan | splice | charCodeAt loop | canonical-token regex | today: parse + pipeline + encode | pass-through: parse + scan + pipeline + splice |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const [name, text] of Object.entries(answers)) {
  // Exact on these answers (the unit test covers the general case).
  {
    const v = JSON.parse(text) as Record<string, unknown>;
    const layout = scanCompletion(text, v)!;
    const final = pipeline(v);
    if (completionJson(layout, final) !== JSON.stringify(pipeline(JSON.parse(text) as Record<string, unknown>))) throw new Error(`${name}: not exact`);
  }
  const parse = time(() => (JSON.parse(text) as object) && 1);
  const final = pipeline(JSON.parse(text) as Record<string, unknown>);
  const encode = time(() => JSON.stringify(final).length);
  const parsed = JSON.parse(text) as Record<string, unknown>;
  const scan = time(() => (scanCompletion(text, parsed) ? 1 : 0));
  const layout = scanCompletion(text, JSON.parse(text) as Record<string, unknown>)!;
  const spliceFinal = pipeline(layout.value);
  // The spliced text flattened (the socket write flattens it too).
  const splice = time(() => {
    const s = completionJson(layout, spliceFinal)!;
    return s.charCodeAt(s.length >> 1);
  });
  const floor = time(() => charLoop(text));
  const usage = time(() => JSON.stringify(final.usage).length);
  if (!TOKENS.test(text)) throw new Error(`${name}: the token regex refuses it`);
  const tokens = time(() => (TOKENS.test(text) ? 1 : 0));
  const today = time(() => JSON.stringify(pipeline(JSON.parse(text) as Record<string, unknown>)).length);
  const pass = time(() => {
    const v = JSON.parse(text) as Record<string, unknown>;
    const l = scanCompletion(text, v)!;
    const s = completionJson(l, pipeline(v))!;
    return s.charCodeAt(s.length >> 1);
  });
  const ns = (x: number) => `${x.toFixed(0)} ns`;
  console.log(`| ${name} | ${text.length} | ${ns(parse)} | ${ns(encode)} | ${ns(usage)} | ${ns(scan)} | ${ns(splice)} | ${ns(floor)} | ${ns(tokens)} | ${ns(today)} | ${ns(pass)} |`);
}
// The ceiling of a learnt template (see the header): the `small` answer's form written by hand.
{
  const text = answers.small!;
  const S = String.raw`("[^"\\\x00-\x1f\ud800-\udfff]*(?:(?:\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f])|[\ud800-\udbff][\udc00-\udfff])[^"\\\x00-\x1f\ud800-\udfff]*)*")`;
  const I = String.raw`(-?(?:[1-9]\d{0,14}|0))`;
  const T = new RegExp(
    String.raw`^\{"id":${S},"object":"chat\.completion","created":${I},"model":"llama-3\.3-70b","system_fingerprint":${S},"choices":\[\{"index":0,"message":\{"role":"assistant","content":${S},"refusal":null\},"logprobs":null,"finish_reason":${S}\}\],"usage":\{"prompt_tokens":${I},"completion_tokens":${I},"total_tokens":${I},"prompt_tokens_details":\{"cached_tokens":${I}\},"completion_tokens_details":\{"reasoning_tokens":${I}\}\}\}$`,
  );
  const sv = (t: string): string => (t.includes("\\") ? (JSON.parse(t) as string) : t.slice(1, -1));
  const build = (m: RegExpExecArray) => ({
    id: sv(m[1]!),
    object: "chat.completion",
    created: Number(m[2]),
    model: "llama-3.3-70b",
    system_fingerprint: sv(m[3]!),
    choices: [{ index: 0, message: { role: "assistant", content: sv(m[4]!), refusal: null }, logprobs: null, finish_reason: sv(m[5]!) }],
    usage: { prompt_tokens: Number(m[6]), completion_tokens: Number(m[7]), total_tokens: Number(m[8]), prompt_tokens_details: { cached_tokens: Number(m[9]) }, completion_tokens_details: { reasoning_tokens: Number(m[10]) } },
  });
  if (JSON.stringify(build(T.exec(text)!)) !== text) throw new Error("the template does not give the parse");
  const parse = time(() => (JSON.parse(text) as object) && 1);
  const exec = time(() => (T.exec(text) ? 1 : 0));
  const built = time(() => (build(T.exec(text)!) ? 1 : 0));
  console.log(`\nsmall, a template of its form: JSON.parse ${parse.toFixed(0)} ns; the template's exec ${exec.toFixed(0)} ns; exec + the object built ${built.toFixed(0)} ns`);
}
console.log(`\nload ${load} → ${loadavg()[0]!.toFixed(2)} (sink ${sink % 10})`);
