// The chat with an intern. It is a client of
// POST /api/v1/interns/{id}/chat/completions like any other: it streams the run (fetch + SSE parsing,
// Authorization header), shows each pending question with a button per offered option and the time
// left before its deadline, and answers with the documented tool message in the same session.
import { api, errorOf, requestInit, seg, session } from "../lib/api.js";
import { announce, errorLine, field, h, replace } from "../lib/dom.js";
import { readEvents } from "../lib/sse.js";

/** Statuses of a refused answer after which the question is still pending (0: the request did not get through). */
const STILL_PENDING = new Set([0, 400, 429, 502, 503, 504]);

const OPTION_LABELS = {
  allow_once: "Allow once",
  allow_always: "Allow always",
  reject_once: "Reject once",
  reject_always: "Reject always",
};

/** The pending question of an intern's chat, kept for this tab so a reload or a visit elsewhere does not lose it. */
const pendingStore = {
  key: (internId) => `portico.console.pending.${internId}`,
  save(internId, value) {
    sessionStorage.setItem(this.key(internId), JSON.stringify(value));
  },
  load(internId) {
    try {
      return JSON.parse(sessionStorage.getItem(this.key(internId)) ?? "null");
    } catch {
      return null;
    }
  },
  clear(internId) {
    sessionStorage.removeItem(this.key(internId));
  },
};

/**
 * Other fields the host added to the question (besides kind, operation, options, deadline_at, and `tool`,
 * which requestedToolView shows as the command or the tool's title and input).
 */
function details(args) {
  const extra = Object.fromEntries(Object.entries(args).filter(([k]) => !["kind", "operation", "options", "deadline_at", "tool"].includes(k)));
  if (Object.keys(extra).length === 0) return null;
  return h("p", {}, "Details: ", h("code", { class: "break" }, JSON.stringify(extra)));
}

export function renderChat(main, params, query) {
  const internId = params.id;
  const state = { sessionId: null, busy: false, controller: null, countdown: null, question: null };
  const transcript = h("ol", { class: "transcript", role: "log", "aria-label": "Conversation", "aria-live": "off" });
  const statusLine = h("p", { class: "run-status", role: "status", "aria-live": "polite" }, "Idle");
  const sessionLine = h("p", { class: "hint" }, "New session");
  const internLink = h("a", { href: `#/interns/${seg(internId)}` }, h("code", {}, internId));
  const hostLine = h("span", {});
  const internLine = h("p", {}, "Intern ", internLink, hostLine, " · ", h("a", { href: "#/interns" }, "All interns"));
  // The intern's name and host status, when the key may read them (the chat works either way).
  api("GET", `/interns/${seg(internId)}`).then(
    (intern) => {
      internLink.replaceChildren(intern.name);
      hostLine.textContent = intern.host?.attached ? `: host attached${intern.host.agent ? ` (agent ${intern.host.agent})` : ""}` : ": no host attached";
    },
    () => {},
  );
  const prompt = h("textarea", { name: "prompt", rows: "3", required: true });
  const mode = h(
    "select",
    { name: "approval_mode" },
    h("option", { value: "manual", selected: true }, "manual: ask before running commands"),
    h("option", { value: "self-drive" }, "self-drive: run without asking"),
  );
  const send = h("button", { type: "submit" }, "Send");
  const newSession = h(
    "button",
    {
      type: "button",
      class: "secondary",
      onclick: () => {
        state.sessionId = null;
        sessionLine.textContent = "New session";
        replace(transcript);
        announce("New session");
      },
    },
    "New session",
  );
  // Stop: cancels the run through the API (streaming or paused) once the session is known; before that
  // (a new session's first run) closing the response cancels it.
  const stop = h(
    "button",
    {
      type: "button",
      class: "danger",
      disabled: true,
      onclick: async () => {
        formErr.show();
        if (!state.sessionId) {
          state.controller?.abort();
          setBusy(false, "Stopped");
          return;
        }
        stop.disabled = true;
        try {
          state.stopped = true;
          await api("POST", `/interns/${seg(internId)}/sessions/${seg(state.sessionId)}/cancel`);
          state.question?.close("Stopped: the run was cancelled.");
          if (state.controller) return; // the open stream ends with the cancellation and says so
          setBusy(false, "Stopped");
          announce("The run was stopped");
        } catch (e) {
          state.stopped = false;
          formErr.show(`${e.status ?? ""} ${e.message}`.trim());
          stop.disabled = !state.busy;
        }
      },
    },
    "Stop",
  );
  const formErr = errorLine();

  main.append(
    h("h1", {}, "Intern chat"),
    internLine,
    sessionLine,
    transcript,
    statusLine,
    h(
      "form",
      {
        class: "card chat-form",
        onsubmit: (ev) => {
          ev.preventDefault();
          if (state.busy || !prompt.value.trim()) return;
          const text = prompt.value;
          prompt.value = "";
          addTurn("user", "You", text);
          void stream({
            stream: true,
            approval_mode: mode.value,
            ...(state.sessionId ? { session_id: state.sessionId } : {}),
            messages: [{ role: "user", content: text }],
          });
        },
      },
      field("Message", prompt, "Lines starting with $ are shell commands for the built-in agent, e.g. $ ls -la"),
      field("Approval mode", mode, "Applies to the run this message starts"),
      formErr.el,
      h("div", { class: "buttons" }, send, stop, newSession),
    ),
  );

  function addTurn(role, who, text) {
    const body = h("div", { class: "turn-body" }, text ?? "");
    const li = h("li", { class: `turn turn-${role}` }, h("p", { class: "who" }, who), body);
    transcript.append(li);
    li.scrollIntoView({ block: "end" });
    return body;
  }

  function setBusy(busy, text) {
    state.busy = busy;
    send.disabled = busy;
    newSession.disabled = busy;
    stop.disabled = !busy;
    statusLine.textContent = text;
  }

  async function stream(body) {
    formErr.show();
    state.stopped = false;
    setBusy(true, "Waiting for the intern…");
    const controller = new AbortController();
    state.controller = controller;
    let res;
    try {
      res = await fetch(`/api/v1/interns/${seg(internId)}/chat/completions`, requestInit("POST", session.key(), body, controller.signal));
    } catch (e) {
      setBusy(false, "Not connected");
      formErr.show(`The request failed: ${e.message}`);
      return { refused: 0 };
    }
    if (!res.ok) {
      const err = await errorOf(res);
      setBusy(false, "Refused");
      formErr.show(`${err.status}: ${err.message}`);
      if (err.status === 401) window.dispatchEvent(new CustomEvent("portico:signed-out", { detail: err.message }));
      return { refused: err.status };
    }
    // Clock skew between this browser and the server, for the question's countdown. The Date header
    // has whole seconds (truncated), so its middle is 500 ms later; smaller differences are noise.
    const serverDate = Date.parse(res.headers.get("date") ?? "");
    const skewRaw = Number.isNaN(serverDate) ? 0 : serverDate + 500 - Date.now();
    const skewMs = Math.abs(skewRaw) < 1500 ? 0 : skewRaw;
    setBusy(true, "The intern is working…");
    let reply;
    let reasoning;
    let question;
    let finish = null;
    try {
      for await (const ev of readEvents(res.body)) {
        if (ev.comment !== undefined || ev.data === undefined) continue;
        if (ev.data === "[DONE]") break;
        const chunk = JSON.parse(ev.data);
        if (Array.isArray(chunk.choices) && chunk.choices.length === 0) {
          if (chunk.session_id) {
            state.sessionId = chunk.session_id;
            sessionLine.replaceChildren("Session ", h("code", {}, chunk.session_id));
            // The run's usage: the sum of its model calls when they went through Portico, else what the agent reported.
            const u = chunk.usage;
            if (u && typeof u.total_tokens === "number") {
              const cost = typeof u.cost === "number" ? `, $${u.cost.toFixed(6)}` : "";
              sessionLine.append(` · last run: ${u.total_tokens} tokens (${u.prompt_tokens} in, ${u.completion_tokens} out${cost})`);
            }
          }
          continue;
        }
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        const d = choice.delta ?? {};
        if (typeof d.reasoning === "string" && d.reasoning) {
          reasoning ??= addTurn("reasoning", "Intern (thinking)", "");
          reasoning.append(d.reasoning);
        }
        if (typeof d.content === "string" && d.content) {
          reply ??= addTurn("assistant", "Intern", "");
          reply.append(d.content);
        }
        if (Array.isArray(d.tool_calls)) {
          for (const call of d.tool_calls) if (call?.function?.name?.endsWith(".provide_input")) question = call;
        }
        if (choice.finish_reason) {
          finish = choice.finish_reason;
          if (finish === "error" && chunk.error) {
            addTurn("error", "Error", `${chunk.error.code}: ${chunk.error.message}`);
          }
        }
      }
    } catch (e) {
      if (controller.signal.aborted) return;
      addTurn("error", "Error", `The stream broke: ${e.message}`);
      finish = "error";
    } finally {
      state.controller = null;
    }
    if (question && finish === "tool_calls") {
      setBusy(true, "Paused: the intern is waiting for your answer");
      pendingStore.save(internId, { sessionId: state.sessionId, call: question, skewMs });
      showQuestion(question, skewMs);
      return;
    }
    if (state.stopped) {
      state.stopped = false;
      setBusy(false, "Stopped");
      return;
    }
    setBusy(false, finish === "stop" ? "Finished" : finish === "error" ? "Ended with an error" : "Stream closed");
  }

  /**
   * What the agent asked to run (the question's `tool`: title, kind, command, input): the command line
   * when there is one, else the tool's title and its input. Null when the question says nothing more.
   */
  function requestedToolView(tool) {
    if (!tool || typeof tool !== "object") return null;
    const text = (v) => (typeof v === "string" && v.trim() ? v : null);
    const command = text(tool.command);
    const title = text(tool.title);
    const parts = [];
    if (command) {
      parts.push(h("p", { class: "tool-label" }, "Command"), h("pre", { class: "tool-command" }, h("code", {}, command)));
      if (title && title !== command) parts.push(h("p", { class: "tool-title" }, title));
    } else {
      if (title) parts.push(h("p", { class: "tool-title" }, title));
      if (tool.input !== undefined && tool.input !== null) {
        parts.push(h("details", { class: "tool-input" }, h("summary", {}, "Input"), h("pre", {}, h("code", {}, JSON.stringify(tool.input, null, 2)))));
      }
    }
    return parts.length ? h("div", { class: "requested-tool" }, ...parts) : null;
  }

  function showQuestion(call, skewMs) {
    let args = {};
    try {
      args = JSON.parse(call.function.arguments || "{}");
    } catch {
      args = {};
    }
    const options = Array.isArray(args.options) ? args.options.filter((o) => typeof o === "string") : [];
    const deadline = typeof args.deadline_at === "string" ? Date.parse(args.deadline_at) : Number.NaN;
    const headingId = `q-${call.id}`;
    const left = h("time", { class: "countdown" });
    const deadlineLine = Number.isNaN(deadline) ? null : h("p", {}, "Answer within ", left, "; after that the run is cancelled.");
    const card = h(
      "li",
      { class: "turn turn-question", role: "group", "aria-labelledby": headingId },
      h("p", { class: "who", id: headingId }, args.operation ? `The intern asks permission: ${args.operation}` : "The intern asks permission"),
      details(args),
      deadlineLine,
    );
    // What the agent asked to run, right under the heading.
    const asked = requestedToolView(args.tool);
    if (asked) card.firstElementChild.after(asked);
    const buttons = h("div", { class: "buttons" });
    const answer = async (option) => {
      state.question = null;
      stopCountdown();
      pendingStore.clear(internId);
      if (deadlineLine) deadlineLine.hidden = true;
      for (const b of buttons.querySelectorAll("button")) b.disabled = true;
      for (const note of card.querySelectorAll(".answered")) note.remove();
      const answered = h("p", { class: "answered" }, `Answered: ${OPTION_LABELS[option] ?? option}`);
      card.append(answered);
      addTurn("user", "You", `${OPTION_LABELS[option] ?? option}`);
      const result = await stream({
        stream: true,
        session_id: state.sessionId,
        messages: [
          { role: "assistant", content: null, tool_calls: [{ id: call.id, type: "function", function: { name: call.function.name, arguments: call.function.arguments } }] },
          { role: "tool", tool_call_id: call.id, content: option },
        ],
      });
      // Refused while the question stays pending (unreachable host, timeout, rate limit, …): answer again.
      // 404, 409 and 410 mean the question is gone (answered elsewhere, expired, run ended).
      if (result && STILL_PENDING.has(result.refused)) {
        answered.textContent = "The answer was not delivered; the question is still waiting.";
        for (const b of buttons.querySelectorAll("button")) b.disabled = false;
        if (deadlineLine) deadlineLine.hidden = false;
        pendingStore.save(internId, { sessionId: state.sessionId, call, skewMs });
        setBusy(true, "Paused: the intern is waiting for your answer");
        startCountdown();
      }
    };
    for (const option of [...options, "cancel"]) {
      buttons.append(
        h(
          "button",
          { type: "button", class: option.startsWith("reject") || option === "cancel" ? "secondary" : "", "data-option": option, onclick: () => void answer(option) },
          option === "cancel" ? "Cancel the run" : (OPTION_LABELS[option] ?? option),
        ),
      );
    }
    card.append(buttons);
    state.question = {
      close(note) {
        stopCountdown();
        pendingStore.clear(internId);
        if (deadlineLine) deadlineLine.hidden = true;
        for (const b of buttons.querySelectorAll("button")) b.disabled = true;
        card.append(h("p", { class: "answered" }, note));
        state.question = null;
      },
    };
    transcript.append(card);
    card.scrollIntoView({ block: "end" });
    buttons.querySelector("button")?.focus();

    function startCountdown() {
      if (Number.isNaN(deadline)) return;
      const tick = () => {
        const ms = deadline - (Date.now() + skewMs);
        if (ms <= 0) {
          stopCountdown();
          pendingStore.clear(internId);
          left.textContent = "0:00";
          for (const b of buttons.querySelectorAll("button")) b.disabled = true;
          card.append(h("p", { class: "error" }, "The question expired: the run is cancelled."));
          setBusy(false, "Expired: the question was not answered in time");
          return;
        }
        const s = Math.floor(ms / 1000);
        left.textContent = `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
        left.setAttribute("datetime", `PT${s}S`);
      };
      tick();
      state.countdown = setInterval(tick, 1000);
    }
    startCountdown();
  }

  function stopCountdown() {
    if (state.countdown) clearInterval(state.countdown);
    state.countdown = null;
  }

  // A session named in the address (#/interns/{id}/chat?session=…, linked from the intern page): its
  // question, read from the API, with its buttons, so a question whose stream was lost can be answered.
  const named = query?.get("session");
  if (named) {
    state.sessionId = named;
    sessionLine.replaceChildren("Session ", h("code", {}, named));
    setBusy(true, "Reading the session…");
    api("GET", `/interns/${seg(internId)}/sessions/${seg(named)}`).then(
      (sess) => {
        if (!main.isConnected) return;
        const q = sess.pending_question;
        if (sess.state === "paused" && q) {
          const call = { id: q.tool_call_id, type: "function", function: { name: q.name, arguments: JSON.stringify(q.arguments ?? {}) } };
          setBusy(true, "Paused: the intern is waiting for your answer");
          pendingStore.save(internId, { sessionId: named, call, skewMs: 0 });
          showQuestion(call, 0);
        } else if (sess.state === "streaming") {
          setBusy(true, "A run is streaming in this session elsewhere; Stop cancels it.");
        } else {
          setBusy(false, "Idle: a new message continues this session");
          prompt.focus();
        }
      },
      (e) => {
        setBusy(false, "Idle");
        formErr.show(`${e.status}: ${e.message}`);
      },
    );
    return () => {
      stopCountdown();
      state.controller?.abort();
    };
  }
  // A question left unanswered in this tab (page reloaded, or visited another page) is shown again.
  const pending = pendingStore.load(internId);
  if (pending?.call?.id && pending.sessionId) {
    state.sessionId = pending.sessionId;
    sessionLine.replaceChildren("Session ", h("code", {}, pending.sessionId));
    setBusy(true, "Paused: the intern is waiting for your answer");
    showQuestion(pending.call, pending.skewMs ?? 0);
  } else {
    prompt.focus();
  }
  // Leaving the page closes a streaming response (the service cancels a streaming run; a paused one waits).
  return () => {
    stopCountdown();
    state.controller?.abort();
  };
}
