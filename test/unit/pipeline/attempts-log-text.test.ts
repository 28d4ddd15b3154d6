/**
 * The generation's attempts log as text (record.ts `attemptsLogText`) is `JSON.stringify` of the entries as the
 * execute stage makes them: every reason, statuses and durations of every kind, the optional waits, strings that
 * need escapes, and entries of unexpected types (which fall back to JSON.stringify).
 */
import { describe, expect, it } from "vitest";
import { attemptsLogText } from "../../../src/core/chat/pipeline/record.js";
import type { AttemptLogEntry } from "../../../src/core/chat/pipeline/stage.js";

const entry = (over: Partial<AttemptLogEntry> & { retry?: number; backoff?: number } = {}): AttemptLogEntry => {
  const { retry, backoff, ...rest } = over;
  const e: AttemptLogEntry = { provider: "groq", model: "groq/llama-3.3-70b", credential_source: "byok", status: 200, reason: "served", duration_ms: 12, ...rest };
  if (retry !== undefined) e.retry_after_ms = retry;
  if (backoff !== undefined) e.backoff_ms = backoff;
  return e;
};

describe("attemptsLogText", () => {
  it("is JSON.stringify of the log", () => {
    const strings = ["groq", "together", "", "quote\"d", "back\\slash", "line\nfeed", "tab\t", "\u0000nul", "é ü 漢字", "emoji 😀", "lone \ud800 surrogate", "\udc00", "\u2028\u2029", "</script>"];
    const numbers = [0, -0, 1, 200, 429, 503, 1.5, 1e21, 2 ** 53, -1, NaN, Infinity, -Infinity];
    const logs: AttemptLogEntry[][] = [[entry()], [entry({ status: null, reason: "timeout" }), entry()]];
    for (const s of strings) logs.push([entry({ provider: s }), entry({ model: s, reason: s, credential_source: s as "byok" })]);
    for (const n of numbers) logs.push([entry({ status: n, duration_ms: n }), entry({ retry: n }), entry({ backoff: n }), entry({ retry: n, backoff: 3 })]);
    logs.push([entry({ status: null, reason: "cooling", duration_ms: 0, retry: 1500 }), entry({ status: 429, reason: "rate_limited", retry: 2000, backoff: 250 }), entry({ backoff: 400 })]);
    // Types the execute stage never makes: the same text all the same.
    const odd = [
      { ...entry(), status: undefined },
      { ...entry(), status: "200" },
      { ...entry(), duration_ms: null },
      { ...entry(), provider: 7 },
      { ...entry(), model: undefined },
      { ...entry(), retry_after_ms: "5" },
      { ...entry(), backoff_ms: null },
      { ...entry(), duration_ms: { toJSON: () => "x" } },
    ] as unknown as AttemptLogEntry[];
    for (const e of odd) logs.push([entry(), e]);
    for (const log of logs) expect(attemptsLogText(log)).toBe(JSON.stringify(log));
    // Strings seen again come from the kept texts.
    for (const log of logs) expect(attemptsLogText(log)).toBe(JSON.stringify(log));
  });
});
