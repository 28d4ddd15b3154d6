// Workspaces of the organization and their members: list, create, one workspace with edit, delete,
// and its members (add by email or user id, remove).
import { api, listAll, messageOf, seg } from "../lib/api.js";
import { actionButton, dataTable, errorLine, errorText, field, h, loading, replace, time } from "../lib/dom.js";

const SLUG_HINT = "1 to 64 lowercase letters, digits and single dashes, unique in the organization";

export async function renderList(main) {
  main.append(h("h1", {}, "Workspaces"));
  const listArea = h("div", {}, loading("Loading workspaces…"));
  main.append(listArea, h("h2", {}, "Create a workspace"), workspaceForm({}, "Create workspace", async (body) => {
    const res = await api("POST", "/workspaces", body);
    location.hash = `#/workspaces/${seg(res.data.id)}`;
  }));
  try {
    const workspaces = await listAll("/workspaces");
    replace(
      listArea,
      dataTable(
        "Workspaces",
        "Workspaces",
        ["Name", "Slug", "Default", "Created"],
        workspaces.map((w) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: `#/workspaces/${seg(w.id)}` }, w.name)),
            h("td", {}, h("code", {}, w.slug)),
            h("td", {}, w.is_default ? "yes" : ""),
            h("td", {}, time(w.created_at)),
          ),
        ),
      ),
    );
  } catch (e) {
    replace(listArea, errorText(e.message));
  }
}

export async function renderWorkspace(main, params) {
  let w;
  try {
    w = (await api("GET", `/workspaces/${seg(params.id)}`)).data;
  } catch (e) {
    main.append(h("h1", {}, "Workspace"), errorText(e.message), h("p", {}, h("a", { href: "#/workspaces" }, "All workspaces")));
    return;
  }
  const status = h("p", { class: "ok", role: "status" });
  main.append(
    h("h1", {}, `Workspace ${w.name}`),
    h("p", {}, h("a", { href: "#/workspaces" }, "All workspaces")),
    status,
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Id"),
      h("dd", {}, h("code", {}, w.id)),
      h("dt", {}, "Slug"),
      h("dd", {}, h("code", {}, w.slug)),
      h("dt", {}, "Description"),
      h("dd", {}, w.description ?? "—"),
      h("dt", {}, "Default"),
      h("dd", {}, w.is_default ? "yes: keys and credentials created without a workspace land here" : "no"),
      h("dt", {}, "Created"),
      h("dd", {}, time(w.created_at)),
    ),
  );

  const members = h("div", {}, loading("Loading members…"));
  main.append(h("h2", {}, "Members"), members, h("h3", {}, "Add members"), addMembersForm(w, () => refreshMembers()));

  async function refreshMembers() {
    let list;
    try {
      list = await listAll(`/workspaces/${seg(w.id)}/members`);
    } catch (e) {
      replace(members, errorText(e.message));
      return;
    }
    replace(
      members,
      list.length === 0
        ? h("p", {}, "No members.")
        : dataTable(
            "Members",
            `Members of ${w.name}`,
            ["Name", "Email", "Role", "User id", "Joined", "Actions"],
            list.map((m) => {
              const err = errorLine();
              return h(
                "tr",
                {},
                h("td", {}, m.name),
                h("td", {}, m.email),
                h("td", {}, m.role),
                h("td", {}, h("code", {}, m.user_id)),
                h("td", {}, time(m.created_at)),
                h(
                  "td",
                  { class: "actions" },
                  actionButton({
                    label: "Remove",
                    ariaLabel: `Remove ${m.email} from ${w.name}`,
                    className: "danger",
                    run: () => api("POST", `/workspaces/${seg(w.id)}/members/remove`, { user_ids: [m.user_id] }),
                    done: (res) => (res.removed_count === 1 ? `Removed ${m.email}.` : `${m.email} was not a member.`),
                    status,
                    after: refreshMembers,
                    err,
                  }),
                  err.el,
                ),
              );
            }),
          ),
    );
  }
  await refreshMembers();

  main.append(
    h("h2", {}, "Edit"),
    workspaceForm(w, "Save changes", async (body) => {
      const res = await api("PATCH", `/workspaces/${seg(w.id)}`, { ...body, description: body.description ?? null });
      status.textContent = `Saved ${res.data.name}.`;
    }),
  );
  if (!w.is_default) {
    const err = errorLine();
    main.append(
      h("h2", {}, "Delete"),
      h(
        "div",
        { class: "card" },
        h("p", {}, "Deleting a workspace removes it from every list; its keys stop working."),
        err.el,
        h(
          "button",
          {
            type: "button",
            class: "danger",
            onclick: async () => {
              if (!window.confirm(`Delete the workspace ${w.name}?`)) return;
              try {
                await api("DELETE", `/workspaces/${seg(w.id)}`);
                location.hash = "#/workspaces";
              } catch (e) {
                err.show(e.message);
              }
            },
          },
          `Delete ${w.name}`,
        ),
      ),
    );
  }
}

function workspaceForm(w, submitLabel, save) {
  const err = errorLine();
  const name = h("input", { type: "text", name: "name", required: true, maxlength: "255", autocomplete: "off", value: w.name ?? "" });
  const slug = h("input", { type: "text", name: "slug", maxlength: "64", autocomplete: "off", spellcheck: "false", value: w.slug ?? "" });
  const description = h("textarea", { name: "description", rows: "2", maxlength: "2000" });
  description.value = w.description ?? "";
  const submit = h("button", { type: "submit" }, submitLabel);
  return h(
    "form",
    {
      class: "card",
      onsubmit: async (ev) => {
        ev.preventDefault();
        err.show();
        submit.disabled = true;
        try {
          await save({
            name: name.value.trim(),
            ...(slug.value.trim() ? { slug: slug.value.trim() } : {}),
            ...(description.value.trim() ? { description: description.value.trim() } : {}),
          });
        } catch (e) {
          err.show(messageOf(e));
        } finally {
          submit.disabled = false;
        }
      },
    },
    field("Name", name),
    field("Slug", slug, w.id ? SLUG_HINT : `Optional; ${SLUG_HINT}`),
    field("Description", description, "Optional, at most 2000 characters"),
    err.el,
    submit,
  );
}

function addMembersForm(w, done) {
  const err = errorLine();
  const input = h("textarea", { name: "members", rows: "2", required: true, spellcheck: "false" });
  const submit = h("button", { type: "submit" }, "Add members");
  return h(
    "form",
    {
      class: "card",
      onsubmit: async (ev) => {
        ev.preventDefault();
        err.show();
        const entries = input.value.split(/[\s,]+/).filter(Boolean);
        const emails = entries.filter((e) => e.includes("@"));
        const userIds = entries.filter((e) => !e.includes("@"));
        if (entries.length === 0) {
          err.show("Name at least one email address or user id.");
          input.focus();
          return;
        }
        submit.disabled = true;
        try {
          await api("POST", `/workspaces/${seg(w.id)}/members/add`, {
            ...(emails.length ? { emails } : {}),
            ...(userIds.length ? { user_ids: userIds } : {}),
          });
          input.value = "";
          await done();
        } catch (e) {
          err.show(messageOf(e));
          input.focus();
        } finally {
          submit.disabled = false;
        }
      },
    },
    field("Email addresses or user ids", input, "Separated by spaces, commas or new lines; new email addresses join the organization"),
    err.el,
    submit,
  );
}
