// The audit log: who changed what, when (newest first), one page of 50 at a time, filterable by action.
import { api } from "../lib/api.js";
import { dataTable, errorText, field, h, replace, time } from "../lib/dom.js";

const PAGE = 50;

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
      field("Action", actionInput, "For example key.create; empty for all"),
      h("button", { type: "submit" }, "Filter"),
    ),
  );
  const area = h("div", {});
  main.append(area);
  const q = new URLSearchParams({ offset: String(offset), limit: String(PAGE) });
  if (action) q.set("action", action);
  let page;
  try {
    page = await api("GET", `/audit?${q}`);
  } catch (e) {
    replace(area, errorText(e.message));
    return;
  }
  const actor = (a) => (a.type === "cli" ? "portico admin (server)" : [h("code", {}, a.key_label ?? "?"), a.user_id ? ` (user ${a.user_id})` : ""]);
  const link = (label, to) => h("a", { href: `#/audit?${new URLSearchParams({ ...(action ? { action } : {}), offset: String(to) })}` }, label);
  replace(
    area,
    h("p", {}, page.total_count === 0 ? "No events." : `Events ${offset + 1} to ${offset + page.data.length} of ${page.total_count}, newest first.`),
    page.data.length === 0
      ? null
      : dataTable(
          "Audit events",
          "Audit events, newest first",
          ["When", "Action", "Target", "Actor", "Details"],
          page.data.map((e) =>
            h(
              "tr",
              {},
              h("td", {}, time(e.created_at)),
              h("td", {}, h("code", {}, e.action)),
              h("td", {}, `${e.target_type} `, h("code", { class: "break" }, e.target_id)),
              h("td", {}, actor(e.actor)),
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
