// BYOK provider credentials: list (masked labels only), create, rotate, disable/enable, delete.
// A key typed into a form goes to the API and nowhere else: the input is cleared once sent and the
// page shows only what the API returns (the masked label).
import { api, listAll, messageOf, seg } from "../lib/api.js";
import { actionButton, dataTable, errorLine, errorText, field, h, loading, replace, time } from "../lib/dom.js";

export async function render(main, _params, query) {
  main.append(
    h("h1", {}, "BYOK credentials"),
    h("p", {}, "Upstream provider keys, encrypted at rest. A stored key is never shown again: the list shows its masked label."),
  );
  // Credentials belong to a workspace; the default one unless another is chosen (#/byok?workspace=<id>).
  let workspaces = [];
  try {
    workspaces = await listAll("/workspaces");
  } catch {
    workspaces = [];
  }
  const chosen = workspaces.find((w) => w.id === query.get("workspace"));
  const workspaceId = chosen && !chosen.is_default ? chosen.id : undefined;
  if (workspaces.length > 1) {
    const select = h(
      "select",
      { name: "workspace" },
      workspaces.map((w) => h("option", { value: w.id, selected: chosen ? w.id === chosen.id : w.is_default }, w.is_default ? `${w.name} (default)` : w.name)),
    );
    main.append(
      h(
        "form",
        {
          class: "inline",
          onsubmit: (ev) => {
            ev.preventDefault();
            location.hash = `#/byok?workspace=${seg(select.value)}`;
          },
        },
        field("Workspace", select),
        h("button", { type: "submit", class: "secondary" }, "Show"),
      ),
    );
  }
  const scope = workspaceId ? `?workspace_id=${seg(workspaceId)}` : "";
  const listArea = h("div", { id: "byok-list" }, loading("Loading credentials…"));
  const status = h("p", { class: "ok", role: "status" });
  // The providers this deployment can route to: the only ones a credential may name.
  let providers;
  try {
    providers = (await api("GET", "/providers")).data;
  } catch {
    providers = undefined;
  }
  main.append(status, listArea, h("h2", {}, "Add a credential"), createForm(workspaceId, providers, async (cred) => {
    status.textContent = `Stored ${cred.provider} credential ${cred.name ?? ""} (${cred.label}).`;
    await refresh();
  }));

  async function refresh() {
    let creds;
    try {
      creds = await listAll(`/byok${scope}`);
    } catch (e) {
      replace(listArea, errorText(e.message));
      return;
    }
    if (creds.length === 0) {
      replace(listArea, h("p", {}, "No credentials yet."));
      return;
    }
    replace(
      listArea,
      dataTable(
        "Credentials",
        "BYOK credentials",
        ["Name", "Provider", "Key (masked)", "State", "Routing", "Created", "Actions"],
        creds.map((c) => row(c, refresh, status)),
      ),
    );
  }
  await refresh();
}

function row(c, refresh, status) {
  const name = c.name ?? "(unnamed)";
  const err = errorLine();
  const rotateArea = h("div", {});
  const rotateButton = h(
    "button",
    {
      type: "button",
      class: "secondary",
      "aria-expanded": "false",
      "aria-label": `Rotate key of ${name}`,
      onclick: () => {
        const open = rotateArea.childElementCount === 0;
        rotateButton.setAttribute("aria-expanded", String(open));
        if (!open) {
          replace(rotateArea);
          return;
        }
        const input = h("input", { type: "password", autocomplete: "off", spellcheck: "false", required: true });
        const formErr = errorLine();
        replace(
          rotateArea,
          h(
            "form",
            {
              class: "inline",
              onsubmit: async (ev) => {
                ev.preventDefault();
                const key = input.value;
                input.value = "";
                try {
                  const res = await api("PATCH", `/byok/${seg(c.id)}`, { key });
                  status.textContent = `Rotated ${name}: now ${res.data.label}.`;
                  await refresh();
                } catch (e) {
                  formErr.show(e.message);
                  input.focus();
                }
              },
            },
            field(`New key for ${name}`, input),
            h("button", { type: "submit" }, "Rotate"),
            formErr.el,
          ),
        );
        input.focus();
      },
    },
    "Rotate",
  );
  const toggle = actionButton({
    label: c.disabled ? "Enable" : "Disable",
    ariaLabel: `${c.disabled ? "Enable" : "Disable"} ${name}`,
    run: () => api("PATCH", `/byok/${seg(c.id)}`, { disabled: !c.disabled }),
    done: `${c.disabled ? "Enabled" : "Disabled"} ${name}.`,
    status,
    after: refresh,
    err,
  });
  const del = actionButton({
    label: "Delete",
    ariaLabel: `Delete ${name}`,
    className: "danger",
    confirm: `Delete the ${c.provider} credential ${name}? Its key material is wiped.`,
    run: () => api("DELETE", `/byok/${seg(c.id)}`),
    done: `Deleted ${name}.`,
    status,
    after: refresh,
    err,
  });
  return h(
    "tr",
    { "data-id": c.id },
    h("td", {}, name),
    h("td", {}, c.provider),
    h("td", {}, h("code", { class: "masked" }, c.label)),
    h("td", {}, c.disabled ? "disabled" : "enabled"),
    h("td", {}, routing(c)),
    h("td", {}, time(c.created_at)),
    h("td", { class: "actions" }, h("div", { class: "buttons" }, rotateButton, toggle, del), rotateArea, err.el),
  );
}

/** A credential's routing flags and restrictions, in words: what decides when it is used. */
function routing(c) {
  const items = [`order ${c.sort_order}`];
  items.push(c.is_fallback ? "fallback: only after the provider's other keys" : "primary");
  if (c.is_required) items.push("required: never shared endpoints of this provider");
  if (c.is_byok_only) items.push("BYOK only: its models run only on your keys");
  if (c.allowed_models) items.push(`models: ${c.allowed_models.length ? c.allowed_models.join(", ") : "none"}`);
  if (c.allowed_api_key_hashes) items.push(`${c.allowed_api_key_hashes.length} API key${c.allowed_api_key_hashes.length === 1 ? "" : "s"} only`);
  if (c.allowed_user_ids) items.push(`${c.allowed_user_ids.length} user${c.allowed_user_ids.length === 1 ? "" : "s"} only`);
  return h("ul", { class: "flags" }, items.map((t) => h("li", {}, t)));
}

const FLAGS = [
  ["is_fallback", "Fallback", "Used only after the provider's other (non-fallback) keys; not with \u201cRequired\u201d or \u201cBYOK only\u201d"],
  ["is_required", "Required", "Requests for this provider never use the shared (operator) keys; not on a fallback key"],
  ["is_byok_only", "BYOK only", "The models this credential applies to run only on your own keys"],
];

/** The provider choice: the providers GET /providers lists, or free text when that list cannot be read. */
function providerInput(providers) {
  if (!providers) {
    return {
      el: h("input", { type: "text", name: "provider", required: true, autocomplete: "off", spellcheck: "false" }),
      hint: "The list of providers could not be read: type the provider slug, for example openai",
    };
  }
  const el = h(
    "select",
    { name: "provider", required: true },
    h("option", { value: "" }, "Choose a provider"),
    providers.map((p) =>
      h("option", { value: p.slug }, `${p.name === p.slug ? p.slug : `${p.name} (${p.slug})`}${p.keyless ? " — needs no key" : ""}${p.configured ? " — already has a credential" : ""}`),
    ),
  );
  return { el, hint: "The providers this deployment can route requests to; model ids are <provider>/<model>" };
}

function createForm(workspaceId, providers, onCreated) {
  const err = errorLine();
  const choice = providerInput(providers);
  const provider = choice.el;
  const flags = FLAGS.map(([name, label, hint]) => {
    const box = h("input", { type: "checkbox", name, id: `byok-${name}` });
    const hintId = `byok-${name}-hint`;
    box.setAttribute("aria-describedby", hintId);
    return { name, box, el: h("div", { class: "check" }, box, h("label", { for: box.id }, label), h("span", { class: "hint", id: hintId }, hint)) };
  });
  const name = h("input", { type: "text", name: "name", autocomplete: "off", maxlength: "255" });
  const key = h("input", { type: "password", name: "key", required: true, autocomplete: "off", spellcheck: "false" });
  const submit = h("button", { type: "submit" }, "Store credential");
  const form = h(
    "form",
    {
      class: "card",
      onsubmit: async (ev) => {
        ev.preventDefault();
        err.show();
        const body = {
          provider: provider.value.trim(),
          key: key.value,
          ...(name.value.trim() ? { name: name.value.trim() } : {}),
          ...(workspaceId ? { workspace_id: workspaceId } : {}),
          ...Object.fromEntries(flags.filter((f) => f.box.checked).map((f) => [f.name, true])),
        };
        // The key leaves the page with this request; it is not kept in the form.
        key.value = "";
        submit.disabled = true;
        try {
          const res = await api("POST", "/byok", body);
          provider.value = "";
          name.value = "";
          for (const f of flags) f.box.checked = false;
          await onCreated(res.data);
        } catch (e) {
          err.show(messageOf(e));
          (e.metadata?.field === "provider" ? provider : key).focus();
        } finally {
          submit.disabled = false;
        }
      },
    },
    field("Provider", provider, choice.hint),
    field("Name", name, "Optional display name"),
    field("Key", key, "Write-only: sent once, encrypted at rest, never shown again"),
    h("fieldset", { class: "flags" }, h("legend", {}, "Routing"), flags.map((f) => f.el)),
    err.el,
    submit,
  );
  return form;
}
