/**
 * Portico's own token count, for where a provider reports none (Gemini's embeddings) or offers no counting
 * endpoint (`count_tokens` on OpenAI-compatible endpoints): the o200k_base encoding (OpenAI's current models'
 * tokenizer) of gpt-tokenizer. Other providers' tokenizers differ, so it is an estimate (docs/dialects.md);
 * special-token text is counted as plain text. The encoding's tables (a few MB) are loaded on first use, not at
 * start-up.
 */
export type TokenCounter = (text: string) => number;

/** Special-token text (`<|endoftext|>`) is plain text here, never a special token and never an error. */
const PLAIN = { disallowedSpecial: new Set<string>() };

let loading: Promise<TokenCounter> | undefined;

/** The counter, loaded once. */
export function tokenCounter(): Promise<TokenCounter> {
  loading ??= import("gpt-tokenizer/encoding/o200k_base").then((m) => (text: string) => (text === "" ? 0 : m.countTokens(text, PLAIN)));
  return loading;
}
