// The console's entry point: sign-in, the hash router and the page frame. Pages live in pages/*.js;
// each exports render(main, params, query) and returns an optional cleanup function.
import { api, session } from "./lib/api.js";
import { announce, errorLine, field, h, replace } from "./lib/dom.js";
import * as keyPage from "./pages/key.js";
import * as keysPage from "./pages/keys.js";
import * as workspacesPage from "./pages/workspaces.js";
import * as auditPage from "./pages/audit.js";
import * as presetsPage from "./pages/presets.js";
import * as byokPage from "./pages/byok.js";
import * as internsPage from "./pages/interns.js";
import * as internAdminPage from "./pages/intern-admin.js";
import * as playgroundPage from "./pages/playground.js";
import * as usagePage from "./pages/usage.js";
import * as catalogPage from "./pages/catalog.js";
import * as requestsPage from "./pages/requests.js";

/** Routes: pattern segments starting with ":" are parameters. */
const routes = [
  { path: "/key", section: "key", page: keyPage.render },
  { path: "/keys", section: "keys", page: keysPage.render },
  { path: "/workspaces", section: "workspaces", page: workspacesPage.renderList },
  { path: "/workspaces/:id", section: "workspaces", page: workspacesPage.renderWorkspace },
  { path: "/audit", section: "audit", page: auditPage.render },
  { path: "/presets", section: "presets", page: presetsPage.renderList },
  { path: "/presets/:slug", section: "presets", page: presetsPage.renderPreset },
  { path: "/byok", section: "byok", page: byokPage.render },
  { path: "/playground", section: "playground", page: playgroundPage.render },
  { path: "/usage", section: "usage", page: usagePage.render },
  { path: "/requests", section: "requests", page: requestsPage.renderList },
  { path: "/requests/:id", section: "requests", page: requestsPage.renderRequest },
  { path: "/catalog", section: "catalog", page: catalogPage.render },
  { path: "/interns", section: "interns", page: internAdminPage.renderList },
  { path: "/interns/:id", section: "interns", page: internAdminPage.renderIntern },
  { path: "/interns/:id/chat", section: "interns", page: internsPage.renderChat },
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
let cleanup;
let signOutNotice = "";

function match(hash) {
  const raw = hash.replace(/^#/, "") || "/key";
  const [path, queryString = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean);
  for (const r of routes) {
    const want = r.path.split("/").filter(Boolean);
    if (want.length !== parts.length) continue;
    const params = {};
    let ok = true;
    want.forEach((w, i) => {
      if (w.startsWith(":")) {
        try {
          params[w.slice(1)] = decodeURIComponent(parts[i]);
        } catch {
          ok = false;
        }
      } else if (w !== parts[i]) ok = false;
    });
    if (ok) return { route: r, params, query: new URLSearchParams(queryString) };
  }
  return undefined;
}

async function show() {
  if (typeof cleanup === "function") cleanup();
  cleanup = undefined;
  if (!session.key()) {
    nav.hidden = true;
    renderSignIn();
    return;
  }
  nav.hidden = false;
  void showProgrammeSections();
  const m = match(location.hash);
  for (const a of nav.querySelectorAll("a[data-section]")) {
    if (m && a.dataset.section === m.route.section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  // Each page renders into its own view: a page still loading when the user moves on writes into a
  // view that is no longer on the page, never into the next one.
  const view = h("div", { class: "view" });
  replace(main, view);
  if (!m) {
    view.append(h("h1", { tabindex: "-1" }, "Page not found"), h("p", {}, h("a", { href: "#/key" }, "Go to the key page")));
  } else {
    const done = await m.route.page(view, m.params, m.query);
    if (!view.isConnected) {
      if (typeof done === "function") done();
      return;
    }
    cleanup = done;
  }
  // Move focus to the new page's heading so keyboard and screen-reader users land on it.
  const heading = view.querySelector("h1");
  if (heading) {
    heading.setAttribute("tabindex", "-1");
    heading.focus();
    document.title = `${heading.textContent} · Portico console`;
  }
}

/** The Interns section only for organizations in the interns programme (GET /key says so). */
let programmeChecked = false;
async function showProgrammeSections() {
  if (programmeChecked) return;
  programmeChecked = true;
  try {
    const me = (await api("GET", "/key")).data;
    nav.querySelector('a[data-section="interns"]').parentElement.hidden = !me.interns_programme;
  } catch {
    programmeChecked = false;
  }
}

function renderSignIn() {
  const input = h("input", {
    type: "password",
    name: "key",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    pattern: "pk-v1-[0-9a-f]{64}",
  });
  const err = errorLine();
  if (signOutNotice) err.show(signOutNotice);
  signOutNotice = "";
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    {
      class: "card narrow",
      "aria-labelledby": "sign-in-title",
      onsubmit: async (ev) => {
        ev.preventDefault();
        const key = input.value.trim();
        if (!/^pk-v1-[0-9a-f]{64}$/.test(key)) {
          err.show("A management key looks like pk-v1- followed by 64 hexadecimal characters.");
          input.focus();
          return;
        }
        submit.disabled = true;
        err.show();
        try {
          const me = await api("GET", "/key", undefined, key);
          if (!me.data.is_management_key) {
            err.show("This key is not a management key. Sign in with a management key.");
            input.focus();
            return;
          }
          session.signIn(key);
          input.value = "";
          announce(`Signed in as ${me.data.label}`);
          if (!location.hash || location.hash === "#/") location.hash = "#/key";
          else await show();
        } catch (e) {
          err.show(e.status === 401 ? "This key was not accepted." : e.message);
          input.focus();
        } finally {
          submit.disabled = false;
        }
      },
    },
    h("h1", { id: "sign-in-title" }, "Sign in"),
    h("p", {}, "Sign in with a management key. It is kept in this browser tab only, and forgotten when you sign out or close the tab."),
    field("Management key", input, "pk-v1-… as printed when it was created"),
    err.el,
    submit,
  );
  replace(main, form);
  document.title = "Sign in · Portico console";
  input.focus();
}

document.getElementById("sign-out").addEventListener("click", () => {
  session.signOut();
  programmeChecked = false;
  announce("Signed out");
  void show();
});

window.addEventListener("portico:signed-out", (ev) => {
  session.signOut();
  programmeChecked = false;
  signOutNotice = `You were signed out: ${ev.detail}`;
  void show();
});

window.addEventListener("hashchange", () => void show());
void show();
