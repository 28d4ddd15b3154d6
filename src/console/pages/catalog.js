// The model catalog with its prices per endpoint (GET /catalog/models), a form per endpoint to change its
// prices and status (PATCH /catalog/models/{slug}/endpoints/{provider}) and a form to add a model
// (PUT /catalog/models/{slug}). Prices are shown and entered in USD per million tokens; the API's per-token
// decimal strings are converted by moving the decimal point, never through floating point.
import { api, listAll, seg } from "../lib/api.js";
import { dataTable, errorLine, errorText, field, h, loading, replace } from "../lib/dom.js";

const DECIMAL = /^\d+(\.\d+)?$/;

/** "0.0000025" per token → "2.5" per million tokens (exact). */
export function perMillion(perToken) {
  if (perToken === undefined || perToken === null) return "—";
  if (!DECIMAL.test(perToken)) return perToken;
  const [int, frac = ""] = perToken.split(".");
  const cut = int.length + 6;
  const whole = (int + frac.padEnd(6, "0")).slice(0, cut).replace(/^0+(?=\d)/, "");
  const rest = (int + frac.padEnd(6, "0")).slice(cut).replace(/0+$/, "");
  return rest ? `${whole}.${rest}` : whole;
}

/** "2.5" per million tokens → "0.0000025" per token (exact); undefined when not a decimal number. */
export function perToken(perMillionText) {
  const t = perMillionText.trim();
  if (!DECIMAL.test(t)) return undefined;
  const [int, frac = ""] = t.split(".");
  const padded = int.padStart(7, "0");
  const whole = padded.slice(0, padded.length - 6).replace(/^0+(?=\d)/, "");
  const rest = (padded.slice(padded.length - 6) + frac).replace(/0+$/, "");
  return rest ? `${whole}.${rest}` : whole;
}

const modelPath = (slug) => {
  const [author, ...rest] = slug.split("/");
  return `/catalog/models/${seg(author)}/${seg(rest.join("/"))}`;
};

export async function render(main) {
  main.append(
    h("h1", {}, "Model catalog"),
    h(
      "p",
      {},
      "Every model the deployment knows, with each endpoint's provider and prices in USD per million tokens. A change here reaches every server within a second and is recorded in the audit log; it applies to the whole deployment.",
    ),
  );
  const status = h("p", { class: "ok", role: "status" });
  const listArea = h("div", {}, loading("Loading the catalog…"));
  let providers = [];
  try {
    providers = (await api("GET", "/providers")).data;
  } catch {
    providers = [];
  }
  main.append(status, listArea, h("h2", {}, "Add a model"), addForm(providers, status, () => refresh()));

  async function refresh() {
    let models;
    try {
      models = await listAll("/catalog/models");
    } catch (e) {
      replace(listArea, errorText(e.message));
      return;
    }
    const rows = [];
    for (const m of models) for (const e of m.endpoints) rows.push(endpointRow(m, e, status, refresh));
    replace(
      listArea,
      models.length === 0
        ? h("p", {}, "No models.")
        : dataTable(
            "Model catalog",
            "Catalog models and their endpoints, with prices in USD per million tokens",
            ["Model", "Provider", "Provider model id", "Prompt / 1M", "Completion / 1M", "Cache read / 1M", "Context", "Status", "Actions"],
            rows,
          ),
    );
  }
  await refresh();
}

function endpointRow(m, e, status, refresh) {
  const editArea = h("div", {});
  const label = `${m.slug} on ${e.provider}`;
  const edit = h(
    "button",
    {
      type: "button",
      class: "secondary",
      "aria-expanded": "false",
      "aria-label": `Edit ${label}`,
      onclick: () => {
        const open = editArea.childElementCount === 0;
        edit.setAttribute("aria-expanded", String(open));
        if (!open) return void replace(editArea);
        replace(editArea, editForm(m, e, label, status, refresh));
      },
    },
    "Edit",
  );
  return h(
    "tr",
    {},
    h("td", {}, m.name, h("br", {}), h("span", { class: "mono" }, m.slug), m.overridden ? h("span", { class: "hint" }, " (changed)") : null),
    h("td", {}, e.provider),
    h("td", { class: "mono" }, e.model_id),
    h("td", {}, perMillion(e.pricing.prompt)),
    h("td", {}, perMillion(e.pricing.completion)),
    h("td", {}, perMillion(e.pricing.input_cache_read)),
    h("td", {}, String(e.context_length)),
    h("td", {}, e.status),
    h("td", {}, edit, editArea),
  );
}

function editForm(m, e, label, status, refresh) {
  const prompt = h("input", { type: "text", inputmode: "decimal", required: true, value: perMillion(e.pricing.prompt) });
  const completion = h("input", { type: "text", inputmode: "decimal", required: true, value: perMillion(e.pricing.completion) });
  const state = h("select", {}, ["active", "deprecated", "disabled"].map((s) => h("option", { value: s, selected: s === e.status }, s)));
  const err = errorLine();
  return h(
    "form",
    {
      class: "inline",
      onsubmit: async (ev) => {
        ev.preventDefault();
        const p = perToken(prompt.value);
        const c = perToken(completion.value);
        if (p === undefined) return err.show("The prompt price must be a decimal number of USD per million tokens, such as 2.5");
        if (c === undefined) return err.show("The completion price must be a decimal number of USD per million tokens, such as 10");
        const changes = {};
        if (p !== e.pricing.prompt || c !== e.pricing.completion) changes.pricing = { ...e.pricing, prompt: p, completion: c };
        if (state.value !== e.status) changes.status = state.value;
        if (Object.keys(changes).length === 0) return err.show("Nothing to change.");
        try {
          await api("PATCH", `${modelPath(m.slug)}/endpoints/${seg(e.provider)}`, changes);
          status.textContent = `Saved ${label}.`;
          await refresh();
        } catch (x) {
          err.show(x.message);
        }
      },
    },
    field(`Prompt price for ${label} (USD per 1M tokens)`, prompt),
    field(`Completion price for ${label} (USD per 1M tokens)`, completion),
    field(`Status of ${label}`, state),
    h("button", { type: "submit" }, "Save"),
    err.el,
  );
}

function addForm(providers, status, refresh) {
  const slug = h("input", { type: "text", required: true, placeholder: "acme/llama-3-8b-local", class: "mono" });
  const name = h("input", { type: "text", required: true });
  const provider = h("select", { required: true }, providers.map((p) => h("option", { value: p.slug }, `${p.name} (${p.slug})`)));
  const modelId = h("input", { type: "text", required: true, class: "mono" });
  const context = h("input", { type: "number", required: true, min: "1", step: "1" });
  const prompt = h("input", { type: "text", inputmode: "decimal", required: true });
  const completion = h("input", { type: "text", inputmode: "decimal", required: true });
  const err = errorLine();
  return h(
    "form",
    {
      onsubmit: async (ev) => {
        ev.preventDefault();
        const p = perToken(prompt.value);
        const c = perToken(completion.value);
        if (p === undefined) return err.show("The prompt price must be a decimal number of USD per million tokens, such as 0.2");
        if (c === undefined) return err.show("The completion price must be a decimal number of USD per million tokens, such as 0.2");
        const s = slug.value.trim();
        if (!s.includes("/")) return err.show("The slug must be <author>/<model>, such as acme/llama-3-8b-local");
        const body = {
          name: name.value.trim(),
          endpoints: [{ provider: provider.value, model_id: modelId.value.trim(), context_length: Number(context.value), pricing: { prompt: p, completion: c } }],
        };
        try {
          await api("GET", modelPath(s));
          return err.show(`${s} is already in the catalog; change its endpoints in the table instead. Nothing was saved.`);
        } catch (x) {
          if (x.status !== 404) return err.show(x.message);
        }
        try {
          await api("PUT", modelPath(s), body);
          err.show();
          status.textContent = `Added ${s}.`;
          for (const i of [slug, name, modelId, context, prompt, completion]) i.value = "";
          await refresh();
        } catch (x) {
          err.show(x.message);
        }
      },
    },
    field("Slug", slug, "<author>/<model>, lowercase author"),
    field("Name", name),
    field("Provider", provider),
    field("Provider model id", modelId, "the id the provider's own API takes"),
    field("Context length (tokens)", context),
    field("Prompt price (USD per 1M tokens)", prompt),
    field("Completion price (USD per 1M tokens)", completion),
    h("button", { type: "submit" }, "Add model"),
    err.el,
  );
}
