/**
 * Plugin "moderation" (docs/plugins.md): before the model call, the request's input is checked by the operator's
 * moderation provider, an API of OpenAI's moderations shape (`POST <base>/moderations` with `{model, input}`;
 * PORTICO_MODERATION_BASE_URL, _API_KEY, _MODEL, _TIMEOUT_MS). The input is the text of every message (string
 * content and text parts; one input string per message; image and file parts are not checked). Flagged → 403
 * `moderation_flagged` with the flagging categories in `metadata.categories`, and nothing is sent to the model.
 * Not configured → 400 naming `plugins[i].id`. The provider failing or not answering in time → 502
 * `upstream_failed` (retryable), nothing sent to the model: the check is never skipped.
 *
 * The report: `flagged`, `categories` (when flagged), `inputs` (messages checked), `model`. Never content.
 */
import type { ModerationConfig } from "../../../../config.js";
import { invalidArgument, Reason, serviceError } from "../../../errors.js";
import { contentText, joinUrl, postJson, readJson } from "../../providers/http.js";
import { UpstreamError } from "../../providers/types.js";
import type { Plugin } from "./types.js";

/** The texts to check: one per message that has text. */
export function moderationInputs(messages: unknown): string[] {
  if (!Array.isArray(messages)) return [];
  const out: string[] = [];
  for (const m of messages as Array<{ content?: unknown }>) {
    const text = contentText(m?.content);
    if (text.trim() !== "") out.push(text);
  }
  return out;
}

interface ModerationAnswer {
  results?: Array<{ flagged?: unknown; categories?: Record<string, unknown> }>;
}

export function createModerationPlugin(config: ModerationConfig | undefined): Plugin {
  return {
    id: "moderation",
    order: 10,
    async before(call, run) {
      if (!config) {
        throw invalidArgument(
          `${run.field}.id`,
          `${run.field}.id "moderation" cannot run: no moderation provider is configured on this deployment (the operator sets PORTICO_MODERATION_BASE_URL; docs/plugins.md)`,
        );
      }
      const input = moderationInputs(call.request.messages);
      run.report.model = config.model;
      run.report.inputs = input.length;
      if (input.length === 0) {
        run.report.flagged = false;
        return;
      }
      let answer: ModerationAnswer;
      try {
        const response = await postJson({
          url: joinUrl(config.baseUrl, "moderations"),
          headers: config.apiKey ? { authorization: `Bearer ${config.apiKey}` } : {},
          body: { model: config.model, input },
          signal: call.signal,
          apiKey: config.apiKey ?? "",
          errorMessage: (b) => (b as { error?: { message?: unknown } } | undefined)?.error?.message as string | undefined,
          firstByteTimeoutMs: config.timeoutMs,
          idleTimeoutMs: config.timeoutMs,
        });
        answer = (await readJson(response)) as ModerationAnswer;
      } catch (err) {
        if (call.signal.aborted) throw err;
        const why = err instanceof UpstreamError ? err.message : "the request failed";
        throw serviceError(Reason.UPSTREAM_FAILED, `The moderation provider did not answer, so nothing was sent to the model: ${why}`, { retryable: true });
      }
      if (!Array.isArray(answer?.results)) {
        throw serviceError(Reason.UPSTREAM_FAILED, "The moderation provider's answer has no results, so nothing was sent to the model", { retryable: true });
      }
      const categories = new Set<string>();
      let flagged = false;
      for (const r of answer.results) {
        if (r?.flagged !== true) continue;
        flagged = true;
        for (const [name, on] of Object.entries(r.categories ?? {})) if (on === true) categories.add(name);
      }
      run.report.flagged = flagged;
      if (!flagged) return;
      const list = [...categories].sort();
      run.report.categories = list;
      throw serviceError(
        Reason.MODERATION_FLAGGED,
        `The moderation provider flagged this request's input${list.length > 0 ? ` (${list.join(", ")})` : ""}; nothing was sent to the model`,
        { flaggedCategories: list },
      );
    },
  };
}
