// Presets: the list, one preset with its versions, a form that creates a version (the same
// chat-completions call any client makes), and a side-by-side diff between two versions.
import { api, listAll, messageOf, seg } from "../lib/api.js";
import { sideBySide, stableJson } from "../lib/diff.js";
import { announce, dataTable, errorLine, errorText, field, h, replace, tableWrap, time } from "../lib/dom.js";

const SLUG = /^[A-Za-z0-9._~-]{1,100}$/;

/** A message for the preset page's status line after it reloads itself. */
let flash = "";

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

export async function renderList(main) {
  main.append(h("h1", {}, "Presets"));
  const listArea = h("div", {});
  main.append(
    listArea,
    h("h2", { id: "new-preset" }, "New preset"),
    versionForm({
      slugInput: true,
      config: { model: "openai/gpt-4o", temperature: 0.7 },
      systemPrompt: "",
      submitLabel: "Create preset",
      onCreated: (res) => {
        location.hash = `#/presets/${seg(res.slug)}`;
      },
    }),
  );
  try {
    const presets = await listAll("/presets");
    if (presets.length === 0) {
      listArea.append(h("p", {}, "No presets yet."));
      return;
    }
    listArea.append(
      dataTable(
        "Presets",
        "Presets, most recently updated first",
        ["Slug", "Name", "Status", "Updated"],
        presets.map((p) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: `#/presets/${seg(p.slug)}` }, p.slug)),
            h("td", {}, p.name),
            h("td", {}, p.status),
            h("td", {}, time(p.updated_at)),
          ),
        ),
      ),
    );
  } catch (e) {
    listArea.append(errorText(e.message));
  }
}

export async function renderPreset(main, params, query) {
  const slug = params.slug;
  main.append(h("h1", {}, `Preset ${slug}`));
  let preset;
  let versions;
  try {
    preset = (await api("GET", `/presets/${seg(slug)}`)).data;
    versions = await listAll(`/presets/${seg(slug)}/versions`);
  } catch (e) {
    main.append(errorText(e.message), h("p", {}, h("a", { href: "#/presets" }, "Back to presets")));
    return;
  }
  const designated = preset.designated_version;
  const status = h("p", { class: "ok", role: "status" });
  const updateErr = errorLine();
  /** PATCH /presets/{slug}, then the page again with the message in its status line. */
  async function update(body, message) {
    updateErr.show();
    try {
      await api("PATCH", `/presets/${seg(slug)}`, body);
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
  main.append(
    h("p", {}, h("a", { href: "#/presets" }, "All presets")),
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
                    onclick: () => void update({ designated_version: v.version }, `Version ${v.version} is now the designated version.`),
                  },
                  "Designate",
                ),
          ),
        ),
      ),
    ),
  );

  const compare = h("section", { "aria-labelledby": "compare-title" }, h("h2", { id: "compare-title" }, "Compare versions"));
  main.append(compare);
  if (versions.length < 2) compare.append(h("p", {}, "A diff needs two versions: create a new version below."));
  else renderCompare(compare, slug, versions, query);

  main.append(h("h2", {}, "Settings"), settingsForm(preset, update));

  main.append(
    h("h2", {}, "New version"),
    h("p", {}, "Saves the configuration below as the next version and makes it the designated one."),
    versionForm({
      slug,
      config: designated?.config ?? {},
      systemPrompt: designated?.system_prompt ?? "",
      submitLabel: "Create version",
      onCreated: (res) => {
        const before = designated ? designated.version : res.designated_version.version - 1;
        const target = `#/presets/${seg(slug)}?a=${before}&b=${res.designated_version.version}`;
        if (location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
        else location.hash = target;
        announce(`Version ${res.designated_version.version} created`);
      },
    }),
  );
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
          history.replaceState(null, "", `#/presets/${seg(slug)}?a=${left.value}&b=${right.value}`);
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

function diffTable(va, vb) {
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
    h("p", { id: "diff-summary" }, changes === 0 ? `Versions ${va.version} and ${vb.version} are identical.` : `${changes} changed line${changes === 1 ? "" : "s"} between version ${va.version} and version ${vb.version}.`),
    tableWrap(
      `Diff of version ${va.version} and version ${vb.version}`,
      h(
        "table",
        { class: "diff", "aria-describedby": "diff-summary" },
        h("caption", {}, `Version ${va.version} (left) and version ${vb.version} (right)`),
        h(
          "thead",
          {},
          h("tr", {}, h("th", { scope: "col", class: "ln" }, "Line"), h("th", { scope: "col" }, `Version ${va.version}`), h("th", { scope: "col", class: "ln" }, "Line"), h("th", { scope: "col" }, `Version ${vb.version}`)),
        ),
        h(
          "tbody",
          {},
          rows.map((r) =>
            h("tr", { class: `diff-${r.kind}` }, cell(r.left, r.kind === "same" ? "same" : "left"), cell(r.right, r.kind === "same" ? "same" : "right")),
          ),
        ),
      ),
    ),
  );
}

/**
 * A form whose fields become a chat-completions body: the configuration object's fields plus a
 * system message (stored as the version's system prompt). Only configuration fields are kept by the
 * service; the body is what any API client would send.
 */
function versionForm({ slug, slugInput, config, systemPrompt, submitLabel, onCreated }) {
  const err = errorLine();
  const slugField = slugInput ? h("input", { type: "text", name: "slug", required: true, autocomplete: "off", spellcheck: "false", maxlength: "100" }) : undefined;
  const prompt = h("textarea", { name: "system_prompt", rows: "3" });
  prompt.value = systemPrompt ?? "";
  const configText = h("textarea", { name: "config", rows: "8", spellcheck: "false", class: "mono" });
  configText.value = stableJson(config ?? {});
  const submit = h("button", { type: "submit" }, submitLabel);
  return h(
    "form",
    {
      class: "card",
      onsubmit: async (ev) => {
        ev.preventDefault();
        err.show();
        const target = slugField ? slugField.value.trim() : slug;
        if (!SLUG.test(target)) {
          err.show("The slug is 1 to 100 characters: letters, digits, '-', '.', '_' and '~'.");
          slugField?.focus();
          return;
        }
        let cfg;
        try {
          cfg = JSON.parse(configText.value || "{}");
        } catch (e) {
          err.show(`The configuration is not valid JSON: ${e.message}`);
          configText.focus();
          return;
        }
        if (!cfg || typeof cfg !== "object" || Array.isArray(cfg)) {
          err.show("The configuration must be a JSON object, for example {\"model\": \"openai/gpt-4o\"}.");
          configText.focus();
          return;
        }
        const messages = prompt.value
          ? [{ role: "system", content: prompt.value }]
          : [{ role: "user", content: "Saved from the Portico console" }];
        submit.disabled = true;
        try {
          const res = await api("POST", `/presets/${seg(target)}/chat/completions`, { ...cfg, messages });
          onCreated(res.data);
        } catch (e) {
          err.show(messageOf(e));
        } finally {
          submit.disabled = false;
        }
      },
    },
    slugField ? field("Slug", slugField, "1 to 100 characters: letters, digits, '-', '.', '_', '~'") : null,
    field("System prompt", prompt, "Optional; stored as the version's system prompt"),
    field("Configuration (JSON)", configText, "Request fields to keep: model, temperature, provider, tools, …"),
    err.el,
    submit,
  );
}
