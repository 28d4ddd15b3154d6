// Presets: the list, one preset with its versions, a form that creates a version (the same
// chat-completions call any client makes), and a side-by-side diff between two versions.
import { api, listAll, messageOf, seg } from "../lib/api.js";
import { sideBySide, stableJson } from "../lib/diff.js";
import { announce, dataTable, errorLine, errorText, field, h, loading, replace, tableWrap, time, uid } from "../lib/dom.js";

const SLUG = /^[A-Za-z0-9._~-]{1,100}$/;

/** A message for the preset page's status line after it reloads itself. */
let flash = "";

/**
 * The workspace the presets pages act in: "" for the signed-in key's own, else the id chosen with the
 * selector (#/presets?workspace=<id>), sent to the API as workspace_id.
 */
let scope = "";
const inScope = (path) => (scope ? `${path}${path.includes("?") ? "&" : "?"}workspace_id=${seg(scope)}` : path);
/** The hash of the presets list (no slug) or of one preset, keeping the chosen workspace. */
function presetHash(slug, params = {}) {
  const q = new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)]));
  if (scope) q.set("workspace", scope);
  return `#/presets${slug === undefined ? "" : `/${seg(slug)}`}${q.size ? `?${q}` : ""}`;
}

/** The workspace selector (shown when the organization has more than one); sets `scope` from the address. */
async function chooseWorkspace(main, query) {
  let workspaces = [];
  let own;
  try {
    [workspaces, own] = await Promise.all([listAll("/workspaces"), api("GET", "/key").then((r) => r.data.workspace_id)]);
  } catch {
    workspaces = [];
  }
  const asked = query.get("workspace") ?? "";
  scope = asked && asked !== own ? asked : "";
  const current = workspaces.find((w) => w.id === (scope || own));
  if (workspaces.length < 2) return current;
  const select = h(
    "select",
    { name: "workspace" },
    workspaces.map((w) => h("option", { value: w.id, selected: w.id === (scope || own) }, `${w.name}${w.id === own ? " (this key's)" : ""}`)),
  );
  main.append(
    h(
      "form",
      {
        class: "inline",
        onsubmit: (ev) => {
          ev.preventDefault();
          scope = select.value === own ? "" : select.value;
          location.hash = presetHash(undefined);
        },
      },
      field("Workspace", select, "Presets belong to a workspace; requests through a preset use the calling key's workspace"),
      h("button", { type: "submit", class: "secondary" }, "Show"),
    ),
  );
  return current;
}

/** Name, description and status of a preset (the management API's PATCH). */
function settingsForm(preset, update) {
  const name = h("input", { type: "text", name: "name", required: true, maxlength: "255", autocomplete: "off", value: preset.name });
  const description = h("textarea", { name: "description", rows: "2", maxlength: "2000" });
  description.value = preset.description ?? "";
  const status = h(
    "select",
    { name: "status" },
    ["active", "disabled", "archived"].map((s) => h("option", { value: s, selected: s === preset.status }, s)),
  );
  return h(
    "form",
    {
      class: "card",
      onsubmit: (ev) => {
        ev.preventDefault();
        void update(
          { name: name.value.trim(), description: description.value.trim() ? description.value.trim() : null, status: status.value },
          "Settings saved.",
        );
      },
    },
    field("Name", name),
    field("Description", description, "Optional, at most 2000 characters"),
    field("Status", status, "Disabled and archived presets keep their versions"),
    h("button", { type: "submit" }, "Save settings"),
  );
}

export async function renderList(main, _params, query) {
  main.append(h("h1", {}, "Presets"));
  const workspace = await chooseWorkspace(main, query);
  if (workspace && scope) main.append(h("p", {}, "Presets of the workspace ", h("strong", {}, workspace.name), "."));
  const listArea = h("div", {}, loading("Loading presets…"));
  main.append(
    listArea,
    h("h2", { id: "new-preset" }, "New preset"),
    h("p", {}, "Creates a preset that does not exist yet. To change an existing preset, open it and create a new version: the changes are shown before anything is saved."),
    newPresetForm(),
  );
  try {
    const presets = await listAll(inScope("/presets"));
    if (presets.length === 0) {
      replace(listArea, h("p", {}, "No presets yet."));
      return;
    }
    replace(
      listArea,
      dataTable(
        "Presets",
        "Presets, most recently updated first",
        ["Slug", "Name", "Status", "Updated"],
        presets.map((p) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: presetHash(p.slug) }, p.slug)),
            h("td", {}, p.name),
            h("td", {}, p.status),
            h("td", {}, time(p.updated_at)),
          ),
        ),
      ),
    );
  } catch (e) {
    replace(listArea, errorText(e.message));
  }
}

export async function renderPreset(main, params, query) {
  const slug = params.slug;
  scope = query.get("workspace") ?? "";
  main.append(h("h1", {}, `Preset ${slug}`));
  const pending = main.appendChild(loading(`Loading preset ${slug}…`));
  let preset;
  let versions;
  try {
    preset = (await api("GET", inScope(`/presets/${seg(slug)}`))).data;
    versions = await listAll(inScope(`/presets/${seg(slug)}/versions`));
  } catch (e) {
    pending.remove();
    main.append(errorText(e.message), h("p", {}, h("a", { href: "#/presets" }, "Back to presets")));
    return;
  }
  pending.remove();
  const designated = preset.designated_version;
  const status = h("p", { class: "ok", role: "status" });
  const updateErr = errorLine();
  /** PATCH /presets/{slug}, then the page again with the message in its status line. */
  async function update(body, message) {
    updateErr.show();
    try {
      await api("PATCH", inScope(`/presets/${seg(slug)}`), body);
      flash = message;
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    } catch (e) {
      updateErr.show(messageOf(e));
    }
  }
  if (flash) {
    status.textContent = flash;
    flash = "";
  }
  // Designating another version replaces the configuration live traffic uses: the change is shown first.
  const designateArea = h("div", {});
  const reviewDesignation = (v) =>
    review(designateArea, {
      slug,
      title: `Designate version ${v.version}?`,
      proposed: v,
      proposedLabel: `Version ${v.version}`,
      confirmLabel: `Confirm: designate version ${v.version}`,
      confirm: () => update({ designated_version: v.version }, `Version ${v.version} is now the designated version.`),
    });
  main.append(
    h("p", {}, h("a", { href: presetHash(undefined) }, "All presets")),
    status,
    updateErr.el,
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Name"),
      h("dd", {}, preset.name),
      h("dt", {}, "Status"),
      h("dd", {}, preset.status),
      h("dt", {}, "Description"),
      h("dd", {}, preset.description ?? "—"),
      h("dt", {}, "Designated version"),
      h("dd", {}, designated ? String(designated.version) : "—"),
      h("dt", {}, "Updated"),
      h("dd", {}, time(preset.updated_at)),
    ),
    h("h2", { id: "current-config-title" }, "Current configuration"),
    currentConfiguration(designated),
    h("h2", {}, "Versions"),
    dataTable(
      "Versions",
      `Versions of ${slug}, oldest first`,
      ["Version", "Model", "Created", "Designated"],
      versions.map((v) =>
        h(
          "tr",
          {},
          h("td", {}, String(v.version)),
          h("td", {}, typeof v.config.model === "string" ? v.config.model : "—"),
          h("td", {}, time(v.created_at)),
          h(
            "td",
            {},
            designated && designated.id === v.id
              ? "yes"
              : h(
                  "button",
                  {
                    type: "button",
                    class: "secondary",
                    "aria-label": `Designate version ${v.version}`,
                    onclick: () => void reviewDesignation(v),
                  },
                  "Designate",
                ),
          ),
        ),
      ),
    ),
    designateArea,
  );

  const compare = h("section", { "aria-labelledby": "compare-title" }, h("h2", { id: "compare-title" }, "Compare versions"));
  main.append(compare);
  if (versions.length < 2) compare.append(h("p", {}, "A diff needs two versions: create a new version below."));
  else renderCompare(compare, slug, versions, query);

  main.append(h("h2", {}, "Settings"), settingsForm(preset, update));

  main.append(
    h("h2", {}, "New version"),
    h(
      "p",
      {},
      "Saves the configuration below as the next version and makes it the designated one, which live traffic then uses. " +
        "\u201cReview changes\u201d shows what changes against the designated version; nothing is saved until you confirm.",
    ),
    newVersionForm(slug, designated),
  );
}

/** The designated version's system prompt and configuration, read-only. */
function currentConfiguration(designated) {
  if (!designated) return h("p", {}, "No designated version: requests through this preset are refused.");
  return h(
    "div",
    { class: "card" },
    h("p", { class: "hint" }, `Version ${designated.version}, created `, time(designated.created_at), "."),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "System prompt"),
      h("dd", {}, designated.system_prompt === null || designated.system_prompt === undefined ? "—" : h("pre", { class: "config" }, designated.system_prompt)),
      h("dt", {}, "Configuration"),
      h("dd", {}, h("pre", { class: "config", "aria-label": `Configuration of version ${designated.version}` }, stableJson(designated.config ?? {}))),
    ),
  );
}

/**
 * Shows in `area` what a change would do to the designated version (the current one, read again from
 * the API) and acts only on an explicit confirmation. If the designated version moved between the review
 * and the confirmation, the new difference is shown and asked again instead.
 */
async function review(area, { slug, title, proposed, proposedLabel, confirmLabel, confirm }) {
  const err = errorLine();
  replace(area, loading("Reading the designated version…"));
  let current;
  try {
    current = (await api("GET", inScope(`/presets/${seg(slug)}`))).data.designated_version;
  } catch (e) {
    replace(area, errorText(messageOf(e)));
    return;
  }
  const titleId = uid("review");
  const left = current ?? { version: 0, system_prompt: null, config: {} };
  const confirmButton = h(
    "button",
    {
      type: "button",
      onclick: async () => {
        confirmButton.disabled = true;
        err.show();
        try {
          const now = (await api("GET", inScope(`/presets/${seg(slug)}`))).data.designated_version;
          if ((now?.id ?? null) !== (current?.id ?? null)) {
            await review(area, { slug, title, proposed, proposedLabel, confirmLabel, confirm });
            area.prepend(h("p", { class: "error", role: "alert" }, `The designated version changed to version ${now?.version ?? "none"} while you reviewed: check the changes again.`));
            return;
          }
          await confirm();
        } catch (e) {
          err.show(messageOf(e));
        } finally {
          confirmButton.disabled = false;
        }
      },
    },
    confirmLabel,
  );
  const cancel = h(
    "button",
    {
      type: "button",
      class: "secondary",
      onclick: () => {
        replace(area);
        announce("Nothing was changed.");
      },
    },
    "Cancel",
  );
  replace(
    area,
    h(
      "section",
      { class: "card review", "aria-labelledby": titleId },
      h("h3", { id: titleId }, title),
      h(
        "p",
        {},
        current
          ? `Live traffic through ${slug} uses version ${current.version} today. This is what changes:`
          : `${slug} has no designated version today. This is the configuration it would get:`,
      ),
      diffTable(left, proposed, { left: current ? `Version ${current.version} (designated)` : "Nothing", right: proposedLabel }),
      err.el,
      h("div", { class: "buttons" }, confirmButton, cancel),
    ),
  );
  confirmButton.focus();
}

function renderCompare(section, slug, versions, query) {
  const numbers = versions.map((v) => v.version);
  const pick = (name, fallback) => {
    const n = Number(query.get(name));
    return numbers.includes(n) ? n : fallback;
  };
  const a = pick("a", numbers[numbers.length - 2]);
  const b = pick("b", numbers[numbers.length - 1]);
  const select = (selected) => h("select", {}, numbers.map((n) => h("option", { value: String(n), selected: n === selected }, `Version ${n}`)));
  const left = select(a);
  const right = select(b);
  const out = h("div", {});
  const draw = () => {
    const va = versions.find((v) => v.version === Number(left.value));
    const vb = versions.find((v) => v.version === Number(right.value));
    replace(out, diffTable(va, vb));
  };
  section.append(
    h(
      "form",
      {
        class: "inline",
        onsubmit: (ev) => {
          ev.preventDefault();
          history.replaceState(null, "", presetHash(slug, { a: left.value, b: right.value }));
          draw();
        },
      },
      field("Left", left),
      field("Right", right),
      h("button", { type: "submit" }, "Compare"),
    ),
    out,
  );
  draw();
}

/** The document a version is compared as: its system prompt and its stored configuration. */
function versionDocument(v) {
  return stableJson({ system_prompt: v.system_prompt, config: v.config });
}

function diffTable(va, vb, labels) {
  const l = labels?.left ?? `Version ${va.version}`;
  const r = labels?.right ?? `Version ${vb.version}`;
  const lower = (t) => t.charAt(0).toLowerCase() + t.slice(1);
  const summaryId = uid("diff-summary");
  const rows = sideBySide(versionDocument(va), versionDocument(vb));
  const changes = rows.filter((r) => r.kind !== "same").length;
  const cell = (side, kind) => {
    if (!side) return [h("td", { class: "ln" }), h("td", { class: "code empty" })];
    const text = side.text;
    const mark = kind === "same" ? text : kind === "left" ? h("del", {}, text) : h("ins", {}, text);
    return [h("td", { class: "ln" }, String(side.n)), h("td", { class: "code" }, mark)];
  };
  return h(
    "div",
    { class: "diff-wrap" },
    h("p", { id: summaryId }, changes === 0 ? `${l} and ${lower(r)} are identical.` : `${changes} changed line${changes === 1 ? "" : "s"} between ${lower(l)} and ${lower(r)}.`),
    tableWrap(
      `Diff of ${lower(l)} and ${lower(r)}`,
      h(
        "table",
        { class: "diff", "aria-describedby": summaryId },
        h("caption", {}, `${l} (left) and ${lower(r)} (right)`),
        h(
          "thead",
          {},
          h("tr", {}, h("th", { scope: "col", class: "ln" }, "Line"), h("th", { scope: "col" }, l), h("th", { scope: "col", class: "ln" }, "Line"), h("th", { scope: "col" }, r)),
        ),
        h(
          "tbody",
          {},
          rows.map((row) =>
            h("tr", { class: `diff-${row.kind}` }, cell(row.left, row.kind === "same" ? "same" : "left"), cell(row.right, row.kind === "same" ? "same" : "right")),
          ),
        ),
      ),
    ),
  );
}

/**
 * The fields of a version form: a chat-completions body (the configuration object's fields plus a
 * system message, stored as the version's system prompt). Only configuration fields are kept by the
 * service; the body is what any API client would send. `read()` answers {cfg, systemPrompt} or shows
 * the problem and answers undefined.
 */
function versionFields({ config, systemPrompt }, err) {
  const prompt = h("textarea", { name: "system_prompt", rows: "3" });
  prompt.value = systemPrompt ?? "";
  const configText = h("textarea", { name: "config", rows: "8", spellcheck: "false", class: "mono" });
  configText.value = stableJson(config ?? {});
  return {
    fields: [
      field("System prompt", prompt, "Optional; stored as the version's system prompt"),
      field("Configuration (JSON)", configText, "Request fields to keep: model, temperature, provider, tools, …"),
    ],
    read() {
      let cfg;
      try {
        cfg = JSON.parse(configText.value || "{}");
      } catch (e) {
        err.show(`The configuration is not valid JSON: ${e.message}`);
        configText.focus();
        return undefined;
      }
      if (!cfg || typeof cfg !== "object" || Array.isArray(cfg)) {
        err.show("The configuration must be a JSON object, for example {\"model\": \"openai/gpt-4o\"}.");
        configText.focus();
        return undefined;
      }
      return { cfg, systemPrompt: prompt.value ? prompt.value : null };
    },
  };
}

/** POST /presets/{slug}/chat/completions: the configuration plus the system prompt as a system message. */
async function createVersion(slug, { cfg, systemPrompt }) {
  const messages = systemPrompt ? [{ role: "system", content: systemPrompt }] : [{ role: "user", content: "Saved from the Portico console" }];
  return (await api("POST", inScope(`/presets/${seg(slug)}/chat/completions`), { ...cfg, messages })).data;
}

/**
 * The list page's form. It creates presets that do not exist: an existing slug is refused (creating it
 * would add a version and designate it, replacing what live traffic uses), with a link to the preset,
 * whose "New version" form shows the change before saving it.
 */
function newPresetForm() {
  const err = errorLine();
  const existing = h("p", { hidden: true });
  const slugField = h("input", { type: "text", name: "slug", required: true, autocomplete: "off", spellcheck: "false", maxlength: "100" });
  const version = versionFields({ config: { model: "openai/gpt-4o", temperature: 0.7 }, systemPrompt: "" }, err);
  const submit = h("button", { type: "submit" }, "Create preset");
  return h(
    "form",
    {
      class: "card",
      onsubmit: async (ev) => {
        ev.preventDefault();
        err.show();
        existing.hidden = true;
        const target = slugField.value.trim();
        if (!SLUG.test(target) || target === "." || target === "..") {
          err.show("The slug is 1 to 100 characters: letters, digits, '-', '.', '_' and '~'.");
          slugField.focus();
          return;
        }
        const body = version.read();
        if (!body) return;
        submit.disabled = true;
        try {
          // Read from the list (not GET /presets/{slug}, whose 404 for a new slug the browser logs as an error).
          const found = (await listAll(inScope("/presets"))).find((p) => p.slug === target);
          if (found) {
            err.show(`A preset named ${target} already exists; nothing was saved. Creating it again would replace the configuration its live traffic uses.`);
            replace(existing, "To change it, ", h("a", { href: presetHash(target) }, `open ${target}`), " and create a new version there: the changes are shown before they are saved.");
            existing.hidden = false;
            slugField.focus();
            return;
          }
          const res = await createVersion(target, body);
          location.hash = presetHash(res.slug);
        } catch (e) {
          err.show(messageOf(e));
        } finally {
          submit.disabled = false;
        }
      },
    },
    field("Slug", slugField, "1 to 100 characters: letters, digits, '-', '.', '_', '~'"),
    version.fields,
    err.el,
    existing,
    submit,
  );
}

/** The preset page's form: the next version, prefilled from the designated one, saved only after its diff is confirmed. */
function newVersionForm(slug, designated) {
  const err = errorLine();
  const version = versionFields({ config: designated?.config ?? {}, systemPrompt: designated?.system_prompt ?? "" }, err);
  const reviewArea = h("div", {});
  const submit = h("button", { type: "submit" }, "Review changes");
  const form = h(
    "form",
    {
      class: "card",
      onsubmit: async (ev) => {
        ev.preventDefault();
        err.show();
        const body = version.read();
        if (!body) return;
        await review(reviewArea, {
          slug,
          title: "Create a new version and designate it?",
          proposed: { version: "new", system_prompt: body.systemPrompt, config: body.cfg },
          proposedLabel: "New version",
          confirmLabel: "Confirm: create the version",
          confirm: async () => {
            const res = await createVersion(slug, body);
            const after = res.designated_version.version;
            const before = designated ? designated.version : after - 1;
            const target = presetHash(slug, { a: before, b: after });
            flash = `Version ${after} created; it is now the designated version.`;
            if (location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
            else location.hash = target;
            announce(`Version ${after} created`);
          },
        });
      },
    },
    version.fields,
    err.el,
    submit,
    reviewArea,
  );
  return form;
}
