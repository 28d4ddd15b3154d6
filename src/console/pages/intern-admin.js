// Interns of the workspace: the list with each intern's host status, one intern with its live
// sessions, settings, lifecycle (suspend, provision, delete) and host token (issue/rotate shown once,
// revoke). The chat itself lives in interns.js.
import { api, listAllByCursor, messageOf, seg } from "../lib/api.js";
import { dataTable, errorLine, errorText, field, h, loading, replace, showSecretOnce, time } from "../lib/dom.js";

/** "attached on core-12 (agent builtin)" or "no host attached". */
function hostText(host) {
  if (!host?.attached) return host?.has_token === false ? "no host token" : "no host attached";
  const parts = ["attached"];
  if (host.instance) parts.push(`on ${host.instance}`);
  if (host.agent) parts.push(`(agent ${host.agent})`);
  return parts.join(" ");
}

function sessionCounts(sessions) {
  const list = Array.isArray(sessions) ? sessions : [];
  const paused = list.filter((s) => s.state === "paused").length;
  const active = list.length - paused;
  return list.length === 0 ? "none" : `${active} streaming, ${paused} paused`;
}

export async function renderList(main) {
  main.append(h("h1", {}, "Interns"));
  const reveal = h("div", {});
  const listArea = h("div", {}, loading("Loading interns…"));
  main.append(
    reveal,
    listArea,
    h("h2", {}, "Create an intern"),
    internForm({}, "Create intern", async (body) => {
      const res = await api("POST", "/interns", body);
      showSecretOnce(reveal, `Host token of ${res.name ?? res.intern?.name}`, "Host token", res.host_token);
      await refresh();
    }),
  );
  async function refresh() {
    let interns;
    try {
      interns = await listAllByCursor("/interns");
    } catch (e) {
      replace(listArea, errorText(e.message));
      return;
    }
    replace(
      listArea,
      interns.length === 0
        ? h("p", {}, "No interns.")
        : dataTable(
            "Interns",
            "Interns, newest first",
            ["Name", "Status", "Host", "Sessions", "Chat"],
            interns.map((i) =>
              h(
                "tr",
                {},
                h("td", {}, h("a", { href: `#/interns/${seg(i.id)}` }, i.name)),
                h("td", {}, i.status),
                h("td", {}, hostText(i.host)),
                h("td", {}, sessionCounts(i.sessions)),
                h("td", {}, h("a", { href: `#/interns/${seg(i.id)}/chat`, "aria-label": `Chat with ${i.name}` }, "Chat")),
              ),
            ),
          ),
    );
  }
  await refresh();
}

/** A message for the intern page's status line after it reloads itself. */
let flash = "";

export async function renderIntern(main, params) {
  const pending = main.appendChild(loading("Loading the intern…"));
  let intern;
  try {
    intern = await api("GET", `/interns/${seg(params.id)}`);
  } catch (e) {
    pending.remove();
    main.append(h("h1", {}, "Intern"), errorText(e.message), h("p", {}, h("a", { href: "#/interns" }, "All interns")));
    return;
  }
  pending.remove();
  const status = h("p", { class: "ok", role: "status" }, flash);
  flash = "";
  const reveal = h("div", {});
  const err = errorLine();
  const reload = (message) => {
    if (message) flash = message;
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  };
  const act = async (label, fn) => {
    err.show();
    try {
      await fn();
      status.textContent = label;
    } catch (e) {
      err.show(e.message);
    }
  };
  const host = intern.host ?? {};
  const sessions = Array.isArray(intern.sessions) ? intern.sessions : [];
  main.append(
    h("h1", {}, `Intern ${intern.name}`),
    h("p", {}, h("a", { href: "#/interns" }, "All interns"), " · ", h("a", { href: `#/interns/${seg(intern.id)}/chat` }, "Chat")),
    status,
    err.el,
    reveal,
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Id"),
      h("dd", {}, h("code", {}, intern.id)),
      h("dt", {}, "Status"),
      h("dd", {}, intern.status),
      h("dt", {}, "Description"),
      h("dd", {}, intern.description ?? "—"),
      h("dt", {}, "Model"),
      h("dd", {}, intern.model ?? "—"),
      h("dt", {}, "Host"),
      h("dd", {}, hostText(host)),
      host.attached_at ? [h("dt", {}, "Attached since"), h("dd", {}, time(host.attached_at))] : null,
      host.reported_model ? [h("dt", {}, "Model reported by the agent"), h("dd", {}, host.reported_model)] : null,
      h("dt", {}, "Created"),
      h("dd", {}, time(intern.created_at)),
    ),
    h("h2", {}, "Live sessions"),
    h(
      "p",
      {},
      h("button", { type: "button", class: "secondary", onclick: () => reload("Sessions refreshed.") }, "Refresh sessions"),
    ),
    sessions.length === 0
      ? h("p", {}, "No streaming or paused session.")
      : dataTable(
          "Live sessions",
          `Live sessions of ${intern.name}`,
          ["Session", "State", "Question", "Run", "Started", "Actions"],
          sessions.map((s) => sessionRow(intern, s, act, reload)),
        ),
    h("h2", {}, "Host token"),
    h(
      "div",
      { class: "card" },
      h("p", {}, "An intern host attaches with this intern's host token. Issuing a new one replaces the old one; revoking leaves none."),
      h(
        "div",
        { class: "buttons" },
        h(
          "button",
          {
            type: "button",
            onclick: () =>
              void act("A new host token was issued.", async () => {
                const res = await api("POST", `/interns/${seg(intern.id)}/host-token`);
                showSecretOnce(reveal, `Host token of ${intern.name}`, "Host token", res.host_token);
              }),
          },
          host.has_token === false ? "Issue a host token" : "Rotate the host token",
        ),
        h(
          "button",
          {
            type: "button",
            class: "danger",
            onclick: () => {
              if (!window.confirm(`Revoke the host token of ${intern.name}? Its host can no longer attach.`)) return;
              void act("The host token was revoked.", () => api("DELETE", `/interns/${seg(intern.id)}/host-token`));
            },
          },
          "Revoke the host token",
        ),
      ),
    ),
    h("h2", {}, "Settings"),
    internForm(intern, "Save settings", async (body) => {
      await api("PATCH", `/interns/${seg(intern.id)}`, {
        ...body,
        description: body.description ?? null,
        instructions: body.instructions ?? null,
        model: body.model ?? null,
      });
      reload();
    }),
    h("h2", {}, "Lifecycle"),
    h(
      "div",
      { class: "card buttons" },
      h(
        "button",
        { type: "button", class: "secondary", onclick: () => void act("Suspended.", async () => (await api("POST", `/interns/${seg(intern.id)}/suspend`), reload())) },
        "Suspend",
      ),
      h(
        "button",
        { type: "button", class: "secondary", onclick: () => void act("Provisioning.", async () => (await api("POST", `/interns/${seg(intern.id)}/provision`), reload())) },
        "Provision",
      ),
      h(
        "button",
        {
          type: "button",
          class: "danger",
          onclick: () => {
            if (!window.confirm(`Delete the intern ${intern.name}?`)) return;
            void act("Deleted.", async () => {
              await api("DELETE", `/interns/${seg(intern.id)}`);
              location.hash = "#/interns";
            });
          },
        },
        `Delete ${intern.name}`,
      ),
    ),
  );
}

/** Fields of a question's arguments shown on their own line; the rest (what the agent asked to run, …) as details. */
const QUESTION_FIELDS = new Set(["kind", "operation", "options", "deadline_at"]);

/**
 * What a paused run's question asks, readable by whoever lost the stream: the operation, the tool call
 * id to answer with, the deadline, and any detail the host added (the command line, a tool's input).
 */
function questionCell(q) {
  if (!q) return "—";
  const args = q.arguments && typeof q.arguments === "object" ? q.arguments : {};
  const extra = Object.fromEntries(Object.entries(args).filter(([k]) => !QUESTION_FIELDS.has(k)));
  const options = Array.isArray(args.options) ? args.options.filter((o) => typeof o === "string") : [];
  return h(
    "dl",
    { class: "facts question" },
    h("dt", {}, "Asks"),
    h("dd", {}, typeof args.operation === "string" && args.operation ? `permission: ${args.operation}` : "permission", typeof args.kind === "string" ? ` (${args.kind})` : ""),
    Object.keys(extra).length > 0 ? [h("dt", {}, "Details"), h("dd", {}, h("code", { class: "break" }, JSON.stringify(extra)))] : null,
    options.length > 0 ? [h("dt", {}, "Options"), h("dd", {}, options.join(", "))] : null,
    h("dt", {}, "Tool call id"),
    h("dd", {}, h("code", { class: "break" }, q.tool_call_id)),
    h("dt", {}, "Deadline"),
    h("dd", {}, time(q.deadline_at)),
  );
}

/** One live session: its question when paused, a link to answer it in the chat, and Stop (cancels the run). */
function sessionRow(intern, s, act, reload) {
  const stop = h(
    "button",
    {
      type: "button",
      class: "danger",
      "aria-label": `Stop the run of session ${s.session_id}`,
      onclick: () => {
        const what = s.state === "paused" ? "paused on a question" : "streaming";
        if (!window.confirm(`Stop the run of session ${s.session_id} (${what})? The run is cancelled and the session can take a new prompt.`)) return;
        void act(`Stopped the run of session ${s.session_id}.`, async () => {
          await api("POST", `/interns/${seg(intern.id)}/sessions/${seg(s.session_id)}/cancel`);
          reload(`Stopped the run of session ${s.session_id}.`);
        });
      },
    },
    "Stop",
  );
  const answer = s.pending_question
    ? h(
        "a",
        { href: `#/interns/${seg(intern.id)}/chat?session=${seg(s.session_id)}`, "aria-label": `Answer the question of session ${s.session_id} in the chat` },
        "Answer in the chat",
      )
    : null;
  return h(
    "tr",
    { "data-session": s.session_id },
    h("td", {}, h("code", { class: "break" }, s.session_id)),
    h("td", {}, s.state),
    h("td", {}, questionCell(s.pending_question)),
    h("td", {}, h("code", { class: "break" }, s.run_id)),
    h("td", {}, time(s.started_at)),
    h("td", { class: "actions" }, h("div", { class: "buttons" }, stop, answer)),
  );
}

function internForm(intern, submitLabel, save) {
  const err = errorLine();
  const name = h("input", { type: "text", name: "name", required: true, maxlength: "17", autocomplete: "off", spellcheck: "false", value: intern.name ?? "" });
  const description = h("textarea", { name: "description", rows: "2", maxlength: "2000" });
  description.value = intern.description ?? "";
  const instructions = h("textarea", { name: "instructions", rows: "4" });
  instructions.value = intern.instructions ?? "";
  const model = h("input", { type: "text", name: "model", autocomplete: "off", spellcheck: "false", value: intern.model ?? "" });
  const submit = h("button", { type: "submit" }, submitLabel);
  const opt = (el) => (el.value.trim() ? el.value.trim() : undefined);
  return h(
    "form",
    {
      class: "card",
      onsubmit: async (ev) => {
        ev.preventDefault();
        err.show();
        submit.disabled = true;
        try {
          const body = { name: name.value.trim() };
          for (const [k, el] of [["description", description], ["instructions", instructions], ["model", model]]) {
            const v = opt(el);
            if (v !== undefined) body[k] = v;
          }
          await save(body);
        } catch (e) {
          err.show(messageOf(e));
        } finally {
          submit.disabled = false;
        }
      },
    },
    field("Name", name, "2 to 17 characters: lowercase letters and digits, single dashes between them, starting with a letter"),
    field("Description", description, "Optional"),
    field("Instructions", instructions, "Optional; handed to the agent at the start of every session"),
    field("Model", model, "Optional model slug such as openai/gpt-4o"),
    err.el,
    submit,
  );
}
