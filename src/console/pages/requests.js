// The request log (docs/console.md, "Request log"): the organization's chat requests (generations), newest
// first, 50 a page by cursor, filtered by model, provider, status, API key and time; one request opened shows
// its whole record: attempts, timings, tokens, cost, what the caller said about it (user, session, trace,
// metadata) and any field a feature adds (cache, plugins, attempt details) as the API returns it.
import { api } from "../lib/api.js";
import { dataTable, errorText, field, h, loading, replace, time } from "../lib/dom.js";
import { loadNames } from "../lib/names.js";

const PAGE = 50;
/** The filters the page's form sets, and the ones a link may add (a session, a user, a trace). */
const FORM_FILTERS = ["model", "provider", "status", "key", "from", "to"];
const LINK_FILTERS = ["session_id", "user", "trace_id"];
const STATUSES = ["success", "error", "cancelled"];

const dash = (v) => (v === null || v === undefined || v === "" ? "—" : String(v));
/** USD as the API gives it (a number), written out without exponent. */
function usd(v) {
  if (v === null || v === undefined) return "—";
  if (v === 0) return "$0";
  const text = v.toFixed(15).replace(/0+$/, "").replace(/\.$/, "");
  return `$${text}`;
}
const ms = (v) => (v === null || v === undefined ? "—" : `${v} ms`);

/** `datetime-local` text (the reader's time) ↔ the API's ISO time. */
const toIso = (local) => {
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? "" : d.toISOString();
};
const toLocal = (iso) => {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
};

function statusText(g) {
  return g.status === "error" && g.error_code ? `error (${g.error_code})` : g.status;
}

export async function renderList(main, _params, query) {
  const filters = {};
  for (const name of [...FORM_FILTERS, ...LINK_FILTERS]) {
    const v = query.get(name);
    if (v) filters[name] = v;
  }
  const after = query.get("after") ?? "";

  const model = h("input", { type: "text", name: "model", value: filters.model ?? "", autocomplete: "off", spellcheck: "false" });
  const provider = h("input", { type: "text", name: "provider", value: filters.provider ?? "", autocomplete: "off", spellcheck: "false" });
  const status = h(
    "select",
    { name: "status" },
    h("option", { value: "", selected: !filters.status }, "Any"),
    STATUSES.map((s) => h("option", { value: s, selected: filters.status === s }, s)),
  );
  const key = h("select", { name: "key" }, h("option", { value: "" }, "Any key"));
  const from = h("input", { type: "datetime-local", name: "from", value: filters.from ? toLocal(filters.from) : "" });
  const to = h("input", { type: "datetime-local", name: "to", value: filters.to ? toLocal(filters.to) : "" });

  const link = (q) => `#/requests${q.size ? `?${q}` : ""}`;
  main.append(
    h("h1", {}, "Request log"),
    h("p", {}, "Every chat request of the organization, newest first: what it asked for, what served it, its outcome, tokens, time and cost. Open one for its whole record."),
    h(
      "form",
      {
        class: "inline",
        "aria-label": "Filter requests",
        onsubmit: (ev) => {
          ev.preventDefault();
          const q = new URLSearchParams();
          const set = (name, v) => v && q.set(name, v);
          set("model", model.value.trim());
          set("provider", provider.value.trim());
          set("status", status.value);
          set("key", key.value);
          set("from", from.value ? toIso(from.value) : "");
          set("to", to.value ? toIso(to.value) : "");
          // A session, user or trace the page was opened for stays until "Clear filters".
          for (const name of LINK_FILTERS) set(name, filters[name]);
          location.hash = link(q);
        },
      },
      field("Model", model, "openai/gpt-4o-mini or a catalog slug"),
      field("Provider", provider, "a provider slug"),
      field("Status", status),
      field("API key", key),
      field("From", from),
      field("To", to),
      h("button", { type: "submit" }, "Filter"),
      Object.keys(filters).length ? h("a", { href: "#/requests" }, "Clear filters") : null,
    ),
  );
  const linked = LINK_FILTERS.filter((n) => filters[n]);
  if (linked.length) {
    main.append(h("p", {}, "Only requests with ", linked.map((n, i) => [i ? ", " : "", `${n} `, h("code", { class: "break" }, filters[n])]), "."));
  }
  const area = h("div", {}, loading("Loading requests…"));
  main.append(area);

  const q = new URLSearchParams({ limit: String(PAGE) });
  for (const [name, v] of Object.entries(filters)) q.set(name, v);
  if (after) q.set("starting_after", after);
  let page;
  let names;
  try {
    [page, names] = await Promise.all([api("GET", `/generations?${q}`), loadNames()]);
  } catch (e) {
    replace(area, errorText(e.metadata?.field ? `${e.message} (${e.metadata.field})` : e.message));
    return;
  }
  key.append(...names.keys.map((k) => h("option", { value: k.hash, selected: filters.key === k.hash }, `${k.name} (${k.label})`)));

  const keyName = (hash) => names.key(hash) ?? h("code", { class: "break" }, hash.slice(0, 12));
  const first = new URLSearchParams(filters);
  const older = new URLSearchParams(filters);
  if (page.next_cursor) older.set("after", page.next_cursor);
  replace(
    area,
    h(
      "p",
      { role: "status" },
      page.data.length === 0
        ? after
          ? "No older requests."
          : Object.keys(filters).length
            ? "No requests match these filters."
            : "No requests yet."
        : `${page.data.length} request${page.data.length === 1 ? "" : "s"}${after ? ", older ones" : ""}, newest first.`,
    ),
    page.data.length === 0
      ? null
      : dataTable(
          "Requests",
          "Chat requests, newest first",
          ["When", "Model", "Provider", "Status", "Key", "Tokens (prompt / completion)", "Latency", "Cost", ""],
          page.data.map((g) =>
            h(
              "tr",
              { "data-id": g.id },
              h("td", {}, time(g.created_at)),
              h("td", {}, h("code", { class: "break" }, g.requested_model), g.model && g.model !== g.requested_model ? [" → ", h("code", { class: "break" }, g.model)] : null),
              h("td", {}, dash(g.provider)),
              h("td", {}, statusText(g)),
              h("td", {}, keyName(g.key_hash)),
              h("td", {}, g.prompt_tokens === null && g.completion_tokens === null ? "—" : `${dash(g.prompt_tokens)} / ${dash(g.completion_tokens)}`),
              h("td", {}, ms(g.latency_ms)),
              h("td", {}, usd(g.total_cost)),
              h("td", {}, h("a", { href: `#/requests/${encodeURIComponent(g.id)}`, "aria-label": `Open request ${g.id}` }, "Open")),
            ),
          ),
        ),
    h(
      "nav",
      { class: "buttons", "aria-label": "Request pages" },
      after ? h("a", { href: link(first) }, "Newest requests") : null,
      page.has_more ? h("a", { href: link(older) }, "Older requests") : null,
    ),
  );
}

/** The record's fields this page names; any other field the API returns is shown under "More". */
const SECTIONS = [
  [
    "Request",
    [
      ["id", "Id"],
      ["created_at", "Arrived"],
      ["key_hash", "API key"],
      ["workspace_id", "Workspace"],
      ["requested_model", "Requested model"],
      ["preset_slug", "Preset"],
      ["preset_version", "Preset version"],
      ["streamed", "Streamed"],
    ],
  ],
  [
    "Outcome",
    [
      ["status", "Status"],
      ["error_code", "Error status"],
      ["finish_reason", "Finish reason"],
      ["provider", "Provider"],
      ["model", "Served model"],
      ["catalog_model", "Catalog model"],
      ["uncatalogued", "Uncatalogued"],
      ["credential_id", "Credential"],
      ["is_byok", "Own provider key (BYOK)"],
      ["attempts", "Attempts"],
    ],
  ],
  [
    "Timings",
    [
      ["latency_ms", "Latency"],
      ["time_to_first_token_ms", "Time to first chunk"],
    ],
  ],
  [
    "Tokens",
    [
      ["prompt_tokens", "Prompt"],
      ["completion_tokens", "Completion"],
      ["total_tokens", "Total"],
      ["native_tokens_cached", "Prompt tokens read from the provider's cache"],
      ["native_tokens_cache_write", "Prompt tokens written to the provider's cache"],
      ["native_tokens_reasoning", "Reasoning"],
    ],
  ],
  [
    "Cost",
    [
      ["total_cost", "Cost to the account"],
      ["upstream_inference_cost", "Provider's price"],
    ],
  ],
  [
    "Cache and plugins",
    [
      ["cache_hit", "Answered from the response cache"],
      ["plugins", "Plugins"],
    ],
  ],
  [
    "Context",
    [
      ["user", "User"],
      ["session_id", "Session"],
      ["trace_id", "Trace id"],
      ["trace", "Trace"],
      ["metadata", "Metadata"],
    ],
  ],
];

function value(key, v, names) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "object") return h("code", { class: "break" }, JSON.stringify(v));
  switch (key) {
    case "created_at":
      return time(v);
    case "key_hash":
      return [names.key(v) ? [names.key(v), " "] : "", h("code", { class: "break" }, v)];
    case "workspace_id":
      return names.workspace(v) ?? h("code", { class: "break" }, v);
    case "latency_ms":
    case "time_to_first_token_ms":
      return ms(v);
    case "total_cost":
    case "upstream_inference_cost":
      return usd(v);
    case "session_id":
    case "user":
    case "trace_id":
      return [h("code", { class: "break" }, v), " ", h("a", { href: `#/requests?${new URLSearchParams({ [key]: v })}` }, "all its requests")];
    default:
      return typeof v === "boolean" ? (v ? "yes" : "no") : String(v);
  }
}

export async function renderRequest(main, params) {
  main.append(h("h1", {}, "Request"), h("p", {}, h("a", { href: "#/requests" }, "Back to the request log")));
  const area = h("div", {}, loading("Loading the request…"));
  main.append(area);
  let g;
  let names;
  try {
    [g, names] = await Promise.all([api("GET", `/generation?id=${encodeURIComponent(params.id)}`).then((r) => r.data), loadNames()]);
  } catch (e) {
    replace(area, errorText(e.status === 404 ? "No such request in this organization." : e.message));
    return;
  }
  const named = new Set([...SECTIONS.flatMap(([, fields]) => fields.map(([k]) => k)), "attempts_log"]);
  const sections = SECTIONS.map(([title, fields]) => {
    const present = fields.filter(([k]) => k in g && !(title === "Cache and plugins" && g[k] === null));
    if (present.length === 0) return null;
    return h(
      "section",
      { "aria-label": title },
      h("h2", {}, title),
      h("dl", { class: "facts" }, present.map(([k, label]) => [h("dt", {}, label), h("dd", {}, value(k, g[k], names))])),
    );
  });
  const more = Object.entries(g).filter(([k, v]) => !named.has(k) && v !== null && v !== undefined);
  const body = h("section", { "aria-label": "Content" }, h("h2", {}, "Content"), loading("Loading the logged content…"));
  replace(
    area,
    sections,
    attemptsSection(g.attempts_log),
    body,
    more.length
      ? h(
          "section",
          { "aria-label": "More" },
          h("h2", {}, "More"),
          h("dl", { class: "facts" }, more.map(([k, v]) => [h("dt", {}, k), h("dd", {}, value(k, v, names))])),
        )
      : null,
  );
  // Content logging (docs/operations.md, "Content logging"): the console signs in with a management key, the only
  // kind that may read the bodies; 404 when the workspace does not log content or the retention has passed.
  let c;
  try {
    c = (await api("GET", `/generation/content?id=${encodeURIComponent(params.id)}`)).data;
  } catch (e) {
    replace(
      body,
      h("h2", {}, "Content"),
      e.status === 404
        ? h("p", {}, "No content was logged for this request: content logging is off for its workspace, or its retention has passed.")
        : errorText(e.message),
    );
    return;
  }
  const json = (v) => h("pre", { class: "break" }, h("code", {}, JSON.stringify(v, null, 2)));
  replace(
    body,
    h("h2", {}, "Content"),
    h("p", {}, "Kept encrypted until ", time(c.expires_at), ". Provider keys and authorization fields are never stored."),
    h("h3", {}, "Request"),
    json(c.request),
    h("h3", {}, "Response"),
    c.response === null ? h("p", {}, "The answer never completed.") : json(c.response),
  );
}

/** Each upstream attempt in order and why it ended (docs/operations.md, "Retries and fallback"); none for a cache hit. */
function attemptsSection(log) {
  if (!Array.isArray(log) || log.length === 0) return null;
  const wait = (v) => (typeof v === "number" ? ms(v) : "—");
  return h(
    "section",
    { "aria-label": "Attempts" },
    h("h2", {}, "Attempts"),
    dataTable(
      "Attempts",
      "Each upstream attempt in order and why it ended",
      ["#", "Provider", "Model", "Credential", "Status", "Reason", "Duration", "Retry-After", "Backoff before"],
      log.map((a, i) =>
        h(
          "tr",
          {},
          h("td", {}, String(i + 1)),
          h("td", {}, a.provider ?? "—"),
          h("td", {}, h("code", { class: "break" }, a.model ?? "—")),
          h("td", {}, a.credential_source === "byok" ? "own key (BYOK)" : a.credential_source === "shared" ? "shared" : "—"),
          h("td", {}, a.status === null || a.status === undefined ? "—" : String(a.status)),
          h("td", {}, a.reason ?? "—"),
          h("td", {}, wait(a.duration_ms)),
          h("td", {}, wait(a.retry_after_ms)),
          h("td", {}, wait(a.backoff_ms)),
        ),
      ),
    ),
  );
}
