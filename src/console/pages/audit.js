// The audit log: who changed what, when (newest first), one page of 50 at a time, filtered by the start
// of the action (action_prefix: "key." is every key change). Keys, workspaces, users and interns are
// shown by name where the console can read one, with the id when it cannot.
import { api } from "../lib/api.js";
import { dataTable, errorText, field, h, loading, replace, time } from "../lib/dom.js";
import { loadNames } from "../lib/names.js";

const PAGE = 50;

/** The name of an event's target: from the organization's lists, else from the event's own details. */
function targetName(e, names) {
  const d = e.details && typeof e.details === "object" ? e.details : {};
  switch (e.target_type) {
    case "api_key":
      return names.key(e.target_id) ?? (typeof d.name === "string" ? d.name : undefined);
    case "workspace":
      return names.workspace(e.target_id) ?? (typeof d.name === "string" ? d.name : undefined);
    case "intern":
      return names.intern(e.target_id) ?? (typeof d.name === "string" ? d.name : undefined);
    case "user":
      return names.user(e.target_id) ?? (typeof d.email === "string" ? d.email : undefined);
    case "preset":
      return typeof d.slug === "string" ? d.slug : undefined;
    case "byok_credential":
      return typeof d.name === "string" ? d.name : typeof d.label === "string" ? d.label : undefined;
    default:
      return undefined;
  }
}

export async function render(main, _params, query) {
  const offset = Math.max(0, Number.parseInt(query.get("offset") ?? "0", 10) || 0);
  const action = query.get("action") ?? "";
  const actionInput = h("input", { type: "text", name: "action", value: action, autocomplete: "off", spellcheck: "false" });
  main.append(
    h("h1", {}, "Audit log"),
    h(
      "form",
      {
        class: "inline",
        onsubmit: (ev) => {
          ev.preventDefault();
          const q = new URLSearchParams();
          if (actionInput.value.trim()) q.set("action", actionInput.value.trim());
          location.hash = `#/audit${q.size ? `?${q}` : ""}`;
        },
      },
      field("Action starts with", actionInput, "For example key. (every key change), preset or key.create; empty for all"),
      h("button", { type: "submit" }, "Filter"),
    ),
  );
  const area = h("div", {}, loading("Loading events…"));
  main.append(area);
  const q = new URLSearchParams({ offset: String(offset), limit: String(PAGE) });
  if (action) q.set("action_prefix", action);
  let page;
  let names;
  try {
    [page, names] = await Promise.all([api("GET", `/audit?${q}`), loadNames({ users: true, withInterns: true })]);
  } catch (e) {
    replace(area, errorText(e.message));
    return;
  }
  const actor = (a) => {
    if (a.type === "cli") return "portico admin (server)";
    const key = a.key_hash ? names.key(a.key_hash) : undefined;
    const user = a.user_id ? names.user(a.user_id) : undefined;
    return [
      key ? [key, " ", h("code", { class: "masked" }, a.key_label ?? "?")] : h("code", {}, a.key_label ?? "?"),
      a.user_id ? [" (", user ?? h("code", { class: "break" }, `user ${a.user_id}`), ")"] : "",
    ];
  };
  const target = (e) => {
    const name = targetName(e, names);
    return [`${e.target_type} `, name ? h("strong", {}, name) : h("code", { class: "break" }, e.target_id)];
  };
  const link = (label, to) => h("a", { href: `#/audit?${new URLSearchParams({ ...(action ? { action } : {}), offset: String(to) })}` }, label);
  replace(
    area,
    h(
      "p",
      {},
      page.total_count === 0
        ? action
          ? `No events whose action starts with ${action}.`
          : "No events."
        : `Events ${offset + 1} to ${offset + page.data.length} of ${page.total_count}, newest first.`,
    ),
    page.data.length === 0
      ? null
      : dataTable(
          "Audit events",
          "Audit events, newest first",
          ["When", "Action", "Target", "Actor", "Workspace", "Details"],
          page.data.map((e) =>
            h(
              "tr",
              {},
              h("td", {}, time(e.created_at)),
              h("td", {}, h("code", {}, e.action)),
              h("td", {}, target(e)),
              h("td", {}, actor(e.actor)),
              h("td", {}, e.workspace_id ? (names.workspace(e.workspace_id) ?? h("code", { class: "break" }, e.workspace_id)) : "—"),
              h("td", {}, h("code", { class: "break" }, JSON.stringify(e.details))),
            ),
          ),
        ),
    h(
      "nav",
      { class: "buttons", "aria-label": "Audit pages" },
      offset > 0 ? link("Newer events", Math.max(0, offset - PAGE)) : null,
      offset + page.data.length < page.total_count ? link("Older events", offset + PAGE) : null,
    ),
  );
}
