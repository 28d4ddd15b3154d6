// The signed-in key: label and hash (never the key itself), tenant, limits.
import { api } from "../lib/api.js";
import { errorText, h } from "../lib/dom.js";

export async function render(main) {
  main.append(h("h1", {}, "Key"));
  let me;
  try {
    me = (await api("GET", "/key")).data;
  } catch (e) {
    main.append(errorText(e.message));
    return;
  }
  const row = (term, value) => [h("dt", {}, term), h("dd", {}, value)];
  main.append(
    h("p", {}, "The key this console is signed in with. Only its label and hash are shown; the key itself is never displayed."),
    h(
      "dl",
      { class: "facts" },
      row("Label", h("code", {}, me.label)),
      row("Hash (SHA-256)", h("code", { class: "break" }, me.hash)),
      row("Management key", me.is_management_key ? "yes" : "no"),
      row("Organization", h("code", {}, me.organization_id)),
      row("Workspace", h("code", {}, me.workspace_id)),
      row("User", h("code", {}, me.user_id)),
      row("Interns programme", me.interns_programme ? "yes" : "no"),
      row("Rate limit", `${me.rate_limit.requests} ${me.rate_limit.note} per ${me.rate_limit.interval}`),
      row("Expires", me.expires_at ?? "never"),
    ),
  );
}
