// BYOK provider credentials: list (masked labels only), create, rotate, disable/enable, delete.
// A key typed into a form goes to the API and nowhere else: the input is cleared once sent and the
// page shows only what the API returns (the masked label).
import { api, listAll, messageOf, seg } from "../lib/api.js";
import { actionButton, dataTable, errorLine, errorText, field, h, replace, time } from "../lib/dom.js";

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
  const listArea = h("div", { id: "byok-list" });
  const status = h("p", { class: "ok", role: "status" });
  main.append(status, listArea, h("h2", {}, "Add a credential"), createForm(workspaceId, async (cred) => {
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
        ["Name", "Provider", "Key (masked)", "State", "Created", "Actions"],
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
    h("td", {}, time(c.created_at)),
    h("td", { class: "actions" }, h("div", { class: "buttons" }, rotateButton, toggle, del), rotateArea, err.el),
  );
}

function createForm(workspaceId, onCreated) {
  const err = errorLine();
  const provider = h("input", { type: "text", name: "provider", required: true, autocomplete: "off", spellcheck: "false" });
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
        };
        // The key leaves the page with this request; it is not kept in the form.
        key.value = "";
        submit.disabled = true;
        try {
          const res = await api("POST", "/byok", body);
          provider.value = "";
          name.value = "";
          await onCreated(res.data);
        } catch (e) {
          err.show(messageOf(e));
          (e.metadata?.field === "provider" ? provider : key).focus();
        } finally {
          submit.disabled = false;
        }
      },
    },
    field("Provider", provider, "Lowercase provider slug, for example openai or anthropic"),
    field("Name", name, "Optional display name"),
    field("Key", key, "Write-only: sent once, encrypted at rest, never shown again"),
    err.el,
    submit,
  );
  return form;
}
