// API keys of the organization: list (labels and hashes only), create, rename, disable/enable,
// delete (revoke). A new key's plaintext is shown once, right after creation, in a box the user
// dismisses; it is never stored by the console and never shown again.
import { api, listAll, messageOf, seg } from "../lib/api.js";
import { actionButton, dataTable, errorLine, errorText, field, h, loading, replace, showSecretOnce, time } from "../lib/dom.js";

export async function render(main) {
  main.append(
    h("h1", {}, "API keys"),
    h("p", {}, "Keys of this organization. A key's plaintext is shown once, when it is created; afterwards only its label and hash."),
  );
  const status = h("p", { class: "ok", role: "status" });
  const reveal = h("div", {});
  const listArea = h("div", {}, loading("Loading keys…"));
  const includeDisabled = h("input", { type: "checkbox", checked: true, onchange: () => void refresh() });
  // Workspace names for the table and the create form (ids where the list cannot be read).
  let workspaces = [];
  try {
    workspaces = await listAll("/workspaces");
  } catch {
    workspaces = [];
  }
  const workspaceName = (id) => workspaces.find((w) => w.id === id)?.name;
  // The key this console is signed in with: disabling or deleting it signs the console out.
  let currentHash;
  try {
    currentHash = (await api("GET", "/key")).data.hash;
  } catch {
    currentHash = undefined;
  }
  main.append(
    status,
    reveal,
    h("div", { class: "check" }, includeDisabled, h("label", { for: (includeDisabled.id = "keys-include-disabled") }, "Show disabled keys")),
    listArea,
    h("h2", {}, "Create a key"),
    createForm(workspaces, async (res) => {
      showSecretOnce(reveal, `New key ${res.data.name}`, "Key", res.key);
      await refresh();
    }),
  );

  async function refresh() {
    let keys;
    try {
      keys = await listAll(`/keys?include_disabled=${includeDisabled.checked}`);
    } catch (e) {
      replace(listArea, errorText(e.message));
      return;
    }
    replace(
      listArea,
      keys.length === 0
        ? h("p", {}, "No keys.")
        : dataTable(
            "API keys",
            "API keys, oldest first",
            ["Name", "Key (masked)", "Kind", "State", "Workspace", "Limits", "Created", "Actions"],
            keys.map((k) => row(k, { workspaceName: workspaceName(k.workspace_id), current: k.hash === currentHash, keys }, refresh, status)),
          ),
    );
  }
  await refresh();
}

/**
 * What disabling or deleting a key means, said before it happens. For the signed-in key: the console
 * signs out at once, and with no other enabled management key only the server's CLI can help.
 */
function consequence(k, current, keys, verb) {
  const base = `${verb} the key ${k.name} (${k.label})? Requests with it are refused at once.`;
  if (!current) return base;
  const otherManagers = keys.filter((o) => o.hash !== k.hash && o.is_management_key && !o.disabled).length;
  return (
    `${base}\n\nThis is the key this console is signed in with: you will be signed out at once.` +
    (otherManagers === 0
      ? `\n\nIt is the organization's only enabled management key: afterwards nobody can manage the organization through the API or this console until an operator runs ${verb === "Disable" ? `"portico admin key enable ${k.hash}"` : `"portico admin key create … --management"`} on the server.`
      : "")
  );
}

function row(k, { workspaceName, current, keys }, refresh, status) {
  const err = errorLine();
  const editArea = h("div", {});
  const rename = h(
    "button",
    {
      type: "button",
      class: "secondary",
      "aria-expanded": "false",
      "aria-label": `Rename ${k.name}`,
      onclick: () => {
        const open = editArea.childElementCount === 0;
        rename.setAttribute("aria-expanded", String(open));
        if (!open) return void replace(editArea);
        const input = h("input", { type: "text", required: true, maxlength: "255", value: k.name });
        const formErr = errorLine();
        replace(
          editArea,
          h(
            "form",
            {
              class: "inline",
              onsubmit: async (ev) => {
                ev.preventDefault();
                try {
                  await api("PATCH", `/keys/${seg(k.hash)}`, { name: input.value.trim() });
                  status.textContent = `Renamed ${k.name} to ${input.value.trim()}.`;
                  await refresh();
                } catch (e) {
                  formErr.show(e.message);
                  input.focus();
                }
              },
            },
            field(`New name for ${k.name}`, input),
            h("button", { type: "submit" }, "Save"),
            formErr.el,
          ),
        );
        input.focus();
      },
    },
    "Rename",
  );
  const toggle = actionButton({
    label: k.disabled ? "Enable" : "Disable",
    ariaLabel: `${k.disabled ? "Enable" : "Disable"} ${k.name}`,
    confirm: k.disabled ? undefined : consequence(k, current, keys, "Disable"),
    run: () => api("PATCH", `/keys/${seg(k.hash)}`, { disabled: !k.disabled }),
    done: `${k.disabled ? "Enabled" : "Disabled"} ${k.name}.`,
    status,
    after: refresh,
    err,
  });
  const del = actionButton({
    label: "Delete",
    ariaLabel: `Delete ${k.name}`,
    className: "danger",
    confirm: consequence(k, current, keys, "Delete"),
    run: () => api("DELETE", `/keys/${seg(k.hash)}`),
    done: `Deleted ${k.name}.`,
    status,
    after: refresh,
    err,
  });
  return h(
    "tr",
    { "data-hash": k.hash },
    h("td", {}, k.name, current ? h("span", { class: "hint" }, " (signed in here)") : null),
    h("td", {}, h("code", { class: "masked" }, k.label)),
    h("td", {}, k.is_management_key ? "management" : "API"),
    h("td", {}, k.disabled ? "disabled" : "enabled"),
    h("td", {}, workspaceName ?? h("code", {}, k.workspace_id)),
    h("td", {}, limitsText(k)),
    h("td", {}, time(k.created_at)),
    h("td", { class: "actions" }, h("div", { class: "buttons" }, rename, toggle, del), editArea, err.el),
  );
}

/** The key's spend limit, expiry and rates in one line (docs/limits.md); "none" when it has none. */
function limitsText(k) {
  const parts = [];
  if (k.limit !== null && k.limit !== undefined) parts.push(`$${k.limit} limit${k.limit_reset && k.limit_reset !== "none" ? ` (${k.limit_reset})` : ""}`);
  if (k.expires_at) parts.push(`expires ${new Date(k.expires_at).toISOString().slice(0, 16).replace("T", " ")} UTC`);
  if (k.rate_limit_rpm) parts.push(`${k.rate_limit_rpm} req/min`);
  if (k.rate_limit_tpm) parts.push(`${k.rate_limit_tpm} tokens/min`);
  return parts.length ? parts.join(" · ") : "none";
}

function createForm(workspaces, onCreated) {
  const err = errorLine();
  const name = h("input", { type: "text", name: "name", required: true, maxlength: "255", autocomplete: "off" });
  const workspace = h(
    "select",
    { name: "workspace_id" },
    h("option", { value: "" }, "The default workspace"),
    workspaces.filter((w) => !w.is_default).map((w) => h("option", { value: w.id }, w.name)),
  );
  const management = h("input", { type: "checkbox", name: "is_management_key", id: "new-key-management" });
  const submit = h("button", { type: "submit" }, "Create key");
  return h(
    "form",
    {
      class: "card",
      onsubmit: async (ev) => {
        ev.preventDefault();
        err.show();
        submit.disabled = true;
        try {
          const res = await api("POST", "/keys", {
            name: name.value.trim(),
            ...(workspace.value ? { workspace_id: workspace.value } : {}),
            is_management_key: management.checked,
          });
          name.value = "";
          management.checked = false;
          await onCreated(res);
        } catch (e) {
          err.show(messageOf(e));
          name.focus();
        } finally {
          submit.disabled = false;
        }
      },
    },
    field("Name", name),
    field("Workspace", workspace),
    h("div", { class: "check" }, management, h("label", { for: "new-key-management" }, "Management key (may manage keys, workspaces, presets and credentials)")),
    err.el,
    submit,
  );
}
