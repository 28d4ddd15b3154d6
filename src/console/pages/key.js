// The signed-in key: its name, label and hash (never the key itself), tenant, limits. The workspace and
// the user are shown by name (with the id) where the console can read one.
import { api } from "../lib/api.js";
import { errorText, h, loading } from "../lib/dom.js";
import { loadNames } from "../lib/names.js";

export async function render(main) {
  main.append(h("h1", {}, "Key"));
  const pending = main.appendChild(loading("Loading the key…"));
  let me;
  let names;
  try {
    [me, names] = await Promise.all([api("GET", "/key").then((r) => r.data), loadNames({ users: true })]);
  } catch (e) {
    pending.remove();
    main.append(errorText(e.message));
    return;
  }
  pending.remove();
  const row = (term, value) => [h("dt", {}, term), h("dd", {}, value)];
  /** "Research (id …)" when a name is known, else the id. */
  const named = (name, id) => (name ? [name, " ", h("code", { class: "hint break" }, id)] : h("code", { class: "break" }, id));
  main.append(
    h("p", {}, "The key this console is signed in with. Only its label and hash are shown; the key itself is never displayed."),
    h(
      "dl",
      { class: "facts" },
      names.key(me.hash) ? row("Name", names.key(me.hash)) : null,
      row("Label", h("code", {}, me.label)),
      row("Hash (SHA-256)", h("code", { class: "break" }, me.hash)),
      row("Management key", me.is_management_key ? "yes" : "no"),
      row("Organization", h("code", {}, me.organization_id)),
      row("Workspace", named(names.workspace(me.workspace_id), me.workspace_id)),
      row("User", named(names.user(me.user_id), me.user_id)),
      row("Interns programme", me.interns_programme ? "yes" : "no"),
      row("Rate limit", `${me.rate_limit.requests} ${me.rate_limit.note} per ${me.rate_limit.interval}`),
      row("Expires", me.expires_at ?? "never"),
    ),
  );
}
