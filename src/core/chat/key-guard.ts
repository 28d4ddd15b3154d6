/**
 * A credential spelled out across streamed pieces. A model that repeats its provider key streams it a few
 * characters per chunk, so no one event holds it whole and the per-event scrub (providers/http.ts
 * `keyScrubber`) cannot see it. This guard follows each text field of a stream (per choice: `content`,
 * `reasoning`, each tool call's `arguments`) with a string-matching automaton (Knuth–Morris–Pratt over the
 * key): once the text emitted so far ends with the key's first {@link KEY_GUARD_PREFIX} characters, the next
 * character becomes `[redacted]` and the characters after it are withheld while they go on spelling the key.
 * Those first characters are all a caller can see of the key: for the providers' formats, the public prefix
 * (`sk-proj-`, `sk-ant-api03-`) and a few characters of the secret part out of a hundred or more.
 *
 * Cost: a piece of text without the key's first character, while no match is under way, costs one
 * `indexOf`; otherwise one automaton step per character of the piece.
 */
import type { ChatChunk } from "./providers/index.js";

/** Characters of a key a stream may show before the rest is withheld (longer than every public key prefix). */
export const KEY_GUARD_PREFIX = 16;

const REDACTED = "[redacted]";

/**
 * One stream's guard: `apply(chunk)` rewrites the chunk's text pieces in place and tells whether it changed any.
 * Undefined for keys too short to guard.
 */
export function createKeyGuard(key: string): { apply(chunk: ChatChunk): boolean } | undefined {
  if (key.length < KEY_GUARD_PREFIX * 2) return undefined;
  const fail = failureTable(key);
  const first = key[0]!;
  /** Matched length of the key at the end of each field's text so far (absent: 0). */
  const states = new Map<string, number>();

  const guard = (field: string, text: string): string => {
    const m0 = states.get(field) ?? 0;
    if (m0 === 0 && !text.includes(first)) return text;
    let m = m0;
    let out = "";
    let from = 0; // start of the run of text not yet copied to `out`
    let changed = false;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      while (m > 0 && key.charCodeAt(m) !== c) m = fail[m - 1]!;
      if (key.charCodeAt(m) === c) m++;
      if (m >= KEY_GUARD_PREFIX) {
        // Inside the key past what may be shown: withhold this character (the first one becomes the marker).
        out += text.slice(from, i);
        if (m === KEY_GUARD_PREFIX) out += REDACTED;
        from = i + 1;
        changed = true;
        if (m === key.length) m = fail[m - 1]!;
      }
    }
    if (m === 0) states.delete(field);
    else states.set(field, m);
    return changed ? out + text.slice(from) : text;
  };

  return {
    apply(chunk) {
      let changed = false;
      for (const choice of chunk.choices ?? []) {
        const delta = choice.delta;
        if (!delta) continue;
        if (typeof delta.content === "string" && delta.content !== "") {
          const text = guard(`${choice.index}:c`, delta.content);
          if (text !== delta.content) {
            delta.content = text;
            changed = true;
          }
        }
        if (typeof delta.reasoning === "string" && delta.reasoning !== "") {
          const text = guard(`${choice.index}:r`, delta.reasoning);
          if (text !== delta.reasoning) {
            delta.reasoning = text;
            changed = true;
          }
        }
        if (delta.tool_calls) {
          for (const call of delta.tool_calls) {
            const args = call.function?.arguments;
            if (typeof args !== "string" || args === "") continue;
            const text = guard(`${choice.index}:t${call.index}`, args);
            if (text !== args) {
              call.function!.arguments = text;
              changed = true;
            }
          }
        }
      }
      return changed;
    },
  };
}

/** KMP failure function: fail[i] = length of the longest proper prefix of key[0..i] that is also its suffix. */
function failureTable(key: string): Int32Array {
  const fail = new Int32Array(key.length);
  let k = 0;
  for (let i = 1; i < key.length; i++) {
    while (k > 0 && key.charCodeAt(i) !== key.charCodeAt(k)) k = fail[k - 1]!;
    if (key.charCodeAt(i) === key.charCodeAt(k)) k++;
    fail[i] = k;
  }
  return fail;
}
