// The playground: one chat completion sent as any client sends it (POST /api/v1/chat/completions with
// the signed-in key), to a model or a preset (the ids GET /models lists, including @preset/<slug>). The
// answer streams in as it comes; then the provider that served it and the generation record
// (GET /api/v1/generation?id=…) are shown. Nothing typed here is stored by the console.
import { api, errorOf, requestInit, session } from "../lib/api.js";
import { announce, errorLine, errorText, field, h, replace } from "../lib/dom.js";
import { readEvents } from "../lib/sse.js";

/** The generation record is written off the request path: ask again for a short while on 404. */
async function generationRecord(id, signal) {
  let wait = 100;
  for (let attempt = 0; attempt < 12; attempt += 1) {
    try {
      return (await api("GET", `/generation?id=${encodeURIComponent(id)}`)).data;
    } catch (e) {
      if (e.status !== 404 || signal.aborted) throw e;
    }
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(wait * 2, 1000);
  }
  throw new Error("The generation record was not written yet; look it up later with its id.");
}

const RECORD_FIELDS = [
  ["provider", "Provider"],
  ["model", "Model"],
  ["requested_model", "Requested model"],
  ["preset_slug", "Preset"],
  ["preset_version", "Preset version"],
  ["credential_id", "Credential"],
  ["status", "Status"],
  ["finish_reason", "Finish reason"],
  ["error_code", "Error status"],
  ["prompt_tokens", "Prompt tokens"],
  ["completion_tokens", "Completion tokens"],
  ["total_tokens", "Total tokens"],
  ["latency_ms", "Latency (ms)"],
  ["time_to_first_token_ms", "Time to first chunk (ms)"],
  ["attempts", "Attempts"],
  ["streamed", "Streamed"],
  ["created_at", "Created"],
];

function recordList(g) {
  const rows = [];
  for (const [key, label] of RECORD_FIELDS) {
    if (!(key in g) || g[key] === null || g[key] === undefined) continue;
    const v = g[key];
    rows.push(h("dt", {}, label), h("dd", {}, typeof v === "object" ? h("code", { class: "break" }, JSON.stringify(v)) : String(v)));
  }
  const shown = new Set(RECORD_FIELDS.map(([k]) => k).concat(["id", "key_hash"]));
  for (const [key, v] of Object.entries(g)) {
    if (shown.has(key) || v === null || v === undefined) continue;
    rows.push(h("dt", {}, key), h("dd", {}, typeof v === "object" ? h("code", { class: "break" }, JSON.stringify(v)) : String(v)));
  }
  return h("dl", { class: "facts" }, rows);
}

export async function render(main) {
  main.append(
    h("h1", {}, "Playground"),
    h("p", {}, "Sends one chat completion with the key this console is signed in with, as any API client would. Choose a model (", h("code", {}, "<provider>/<model>"), ") or a preset (", h("code", {}, "@preset/<slug>"), ")."),
  );
  const modelsList = h("datalist", { id: "playground-models" });
  const model = h("input", { type: "text", name: "model", required: true, autocomplete: "off", spellcheck: "false", list: "playground-models" });
  const system = h("textarea", { name: "system", rows: "2" });
  const message = h("textarea", { name: "message", rows: "4", required: true });
  const stream = h("input", { type: "checkbox", name: "stream", id: "playground-stream", checked: true });
  const send = h("button", { type: "submit" }, "Send");
  const stop = h("button", { type: "button", class: "secondary", disabled: true }, "Stop");
  const err = errorLine();
  const statusLine = h("p", { class: "run-status", role: "status", "aria-live": "polite" }, "Idle");
  const answer = h("div", { class: "turn-body answer", role: "region", "aria-label": "Answer", "aria-live": "off", tabindex: "0" });
  const servedBy = h("p", {});
  const recordArea = h("section", { "aria-labelledby": "generation-title" }, h("h2", { id: "generation-title" }, "Generation record"), h("p", {}, "Shown after a completion."));
  let controller;

  // The ids the key may ask for: models and the workspace's presets.
  api("GET", "/models").then(
    (res) => replace(modelsList, (res.data ?? []).map((m) => h("option", { value: m.id }))),
    () => {},
  );

  stop.addEventListener("click", () => controller?.abort());

  main.append(
    h(
      "form",
      {
        class: "card",
        onsubmit: async (ev) => {
          ev.preventDefault();
          err.show();
          if (!model.value.trim() || !message.value.trim()) {
            err.show("A model (or preset) and a message are needed.");
            (model.value.trim() ? message : model).focus();
            return;
          }
          const body = {
            model: model.value.trim(),
            stream: stream.checked,
            messages: [...(system.value.trim() ? [{ role: "system", content: system.value }] : []), { role: "user", content: message.value }],
          };
          controller = new AbortController();
          send.disabled = true;
          stop.disabled = false;
          answer.textContent = "";
          servedBy.textContent = "";
          replace(recordArea, h("h2", { id: "generation-title" }, "Generation record"), h("p", {}, "Waiting for the completion…"));
          statusLine.textContent = "Sending…";
          try {
            const out = await complete(body, controller.signal);
            servedBy.replaceChildren(
              "Served by ",
              h("strong", {}, out.provider ?? "?"),
              out.model ? [" (model ", h("code", {}, out.model), ")"] : "",
              out.id ? [", generation ", h("code", { class: "break" }, out.id)] : "",
            );
            statusLine.textContent = out.finish ? `Finished (${out.finish})` : "Finished";
            announce("The answer is complete");
            if (out.id) {
              replace(recordArea, h("h2", { id: "generation-title" }, "Generation record"), h("p", { class: "loading", role: "status", "aria-busy": "true" }, "Reading the generation record…"));
              try {
                const g = await generationRecord(out.id, controller.signal);
                replace(recordArea, h("h2", { id: "generation-title" }, "Generation record"), recordList(g));
              } catch (e) {
                replace(recordArea, h("h2", { id: "generation-title" }, "Generation record"), errorText(e.message));
              }
            }
          } catch (e) {
            if (controller.signal.aborted) statusLine.textContent = "Stopped";
            else {
              statusLine.textContent = "Failed";
              err.show(e.status ? `${e.status}: ${e.message}` : e.message);
            }
            replace(recordArea, h("h2", { id: "generation-title" }, "Generation record"), h("p", {}, "No record shown."));
          } finally {
            send.disabled = false;
            stop.disabled = true;
          }
        },
      },
      field("Model or preset", model, "For example openai/gpt-4o-mini or @preset/support-bot; the list offers what this key may use"),
      modelsList,
      field("System message", system, "Optional"),
      field("Message", message),
      h("div", { class: "check" }, stream, h("label", { for: stream.id }, "Stream the answer")),
      err.el,
      h("div", { class: "buttons" }, send, stop),
    ),
    statusLine,
    h("h2", {}, "Answer"),
    answer,
    servedBy,
    recordArea,
  );

  /** Sends the request; fills `answer` as chunks arrive. Answers {id, provider, model, finish}. */
  async function complete(body, signal) {
    const res = await fetch("/api/v1/chat/completions", requestInit("POST", session.key(), body, signal));
    if (!res.ok) {
      const e = await errorOf(res);
      if (e.status === 401) window.dispatchEvent(new CustomEvent("portico:signed-out", { detail: e.message }));
      throw e;
    }
    if (!body.stream) {
      const c = await res.json();
      answer.textContent = c.choices?.[0]?.message?.content ?? "";
      return { id: c.id, provider: c.provider, model: c.model, finish: c.choices?.[0]?.finish_reason };
    }
    statusLine.textContent = "Streaming…";
    const out = { id: undefined, provider: undefined, model: undefined, finish: undefined };
    for await (const ev of readEvents(res.body)) {
      if (ev.comment !== undefined || ev.data === undefined) continue;
      if (ev.data === "[DONE]") break;
      const chunk = JSON.parse(ev.data);
      if (chunk.error) throw Object.assign(new Error(chunk.error.message ?? "The stream ended with an error"), { status: chunk.error.code });
      out.id ??= chunk.id;
      out.provider ??= chunk.provider;
      out.model ??= chunk.model;
      const choice = chunk.choices?.[0];
      const text = choice?.delta?.content;
      if (typeof text === "string" && text) answer.append(text);
      if (choice?.finish_reason) out.finish = choice.finish_reason;
    }
    return out;
  }
}
