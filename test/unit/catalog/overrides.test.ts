/**
 * The catalog's management layer (src/core/catalog/overrides.ts), without a database: precedence over the
 * lower layers (built-in < operator file < overrides), the rules a change must keep (400 naming the field),
 * and rows that no longer apply after the file changed (skipped, the rest kept).
 */
import { describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { createCatalog, mergeCatalogs } from "../../../src/core/catalog/catalog.js";
import { addOrReplaceModel, applyOverrides, changeEndpoint, removeEndpoint, removeModel, type OverrideContext, type OverrideRow } from "../../../src/core/catalog/overrides.js";

const LLAMA = "meta-llama/llama-3.3-70b-instruct";
const serves = (slug: string) => ["groq", "together", "fireworks", "openai", "ollama"].includes(slug);
// The operator file sets Groq's Llama price; the overrides go over it.
const base = mergeCatalogs(BUILTIN_CATALOG, { version: 1, models: [{ slug: LLAMA, endpoints: [{ provider: "groq", pricing: { prompt: "0.0000005", completion: "0.0000006" } }] }] });
const ctx = (rows: OverrideRow[] = []): OverrideContext => ({ base, rows, serves });
const served = (rows: OverrideRow[]) => createCatalog(applyOverrides(base, rows));

describe("catalog overrides", () => {
  it("an endpoint change goes over the operator file's figures and keeps the file's other changes", () => {
    const row = changeEndpoint(ctx(), LLAMA, "groq", { status: "deprecated" });
    const groq = served([row]).model(LLAMA)!.endpoints.find((e) => e.provider === "groq")!;
    expect(groq).toMatchObject({ status: "deprecated", pricing: { prompt: "0.0000005", completion: "0.0000006" } });
    const priced = changeEndpoint(ctx([row]), LLAMA, "groq", { pricing: { prompt: "0.0000001", completion: "0.0000002" } });
    expect(served([priced]).model(LLAMA)!.endpoints.find((e) => e.provider === "groq")).toMatchObject({ status: "deprecated", pricing: { prompt: "0.0000001", completion: "0.0000002" } });
    expect(priced.kind).toBe("patch");
  });

  it("a put model replaces the lower layers' model whole; removing a model and an endpoint", () => {
    const row = addOrReplaceModel(ctx(), LLAMA, { name: "Ours", endpoints: [{ provider: "ollama", model_id: "llama3.3", context_length: 8192, pricing: { prompt: "0", completion: "0" } }] });
    const m = served([row]).model(LLAMA)!;
    expect(m.name).toBe("Ours");
    expect(m.endpoints.map((e) => e.provider)).toEqual(["ollama"]);
    // Groq's id is free again: the replaced model no longer claims it.
    expect(served([row]).endpointFor("groq", "llama-3.3-70b-versatile")).toBeUndefined();
    expect(served([removeModel(ctx(), LLAMA)!]).model(LLAMA)).toBeUndefined();
    const noFireworks = removeEndpoint(ctx(), LLAMA, "fireworks")!;
    expect(served([noFireworks]).endpointsOf(LLAMA).map((e) => e.provider)).not.toContain("fireworks");
    // A model that exists only as a row is removed by dropping the row.
    const added = addOrReplaceModel(ctx(), "acme/x", { name: "X", endpoints: [{ provider: "ollama", model_id: "x", context_length: 10, pricing: { prompt: "0", completion: "0" } }] });
    expect(removeModel(ctx([added]), "acme/x")).toBeNull();
  });

  it("refuses a change that breaks a rule, naming the field", () => {
    const tiny = { name: "T", endpoints: [{ provider: "ollama", model_id: "t", context_length: 10, pricing: { prompt: "0", completion: "0" } }] };
    const refused = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return (err as ConnectError).rawMessage;
      }
      throw new Error("not refused");
    };
    expect(refused(() => addOrReplaceModel(ctx(), "acme/t", { ...tiny, endpoints: [{ ...tiny.endpoints[0], pricing: { prompt: "1e-6", completion: "0" } }] }))).toMatch(/^endpoints\[0\]\.pricing\.prompt must be a decimal string/);
    expect(refused(() => addOrReplaceModel(ctx(), "acme/t", { ...tiny, endpoints: [{ ...tiny.endpoints[0], provider: "nowhere" }] }))).toMatch(/^endpoints\[0\]\.provider must name a provider this deployment serves/);
    expect(refused(() => addOrReplaceModel(ctx(), "acme/t", { ...tiny, endpoints: [tiny.endpoints[0], tiny.endpoints[0]] }))).toMatch(/^endpoints\[1\]\.provider names a provider listed twice/);
    expect(refused(() => addOrReplaceModel(ctx(), "Acme/t", tiny))).toMatch(/^slug must be a canonical slug/);
    expect(refused(() => addOrReplaceModel(ctx(), "acme/t", { ...tiny, slug: "acme/other" }))).toMatch(/^slug must be the model's slug/);
    expect(refused(() => changeEndpoint(ctx(), LLAMA, "groq", { context_length: 0 }))).toMatch(/^context_length/);
    expect(refused(() => changeEndpoint(ctx(), "openai/gpt-4o", "openai", { model_id: "gpt-4o-mini" }))).toMatch(/^model_id must name a model id no other model has: provider openai's model id "gpt-4o-mini"/);
    expect(refused(() => removeEndpoint(ctx(), "openai/gpt-4o", "openai"))).toMatch(/last endpoint: remove the model instead/);
    expect(refused(() => changeEndpoint(ctx(), "acme/none", "groq", { status: "active" }))).toMatch(/^No model acme\/none/);
  });

  it("a row that no longer applies is skipped and reported; the others still apply", () => {
    const skipped: string[] = [];
    const rows: OverrideRow[] = [
      { slug: "acme/gone", kind: "patch", entry: { slug: "acme/gone", endpoints: [{ provider: "groq", status: "disabled" }] } },
      changeEndpoint(ctx(), LLAMA, "groq", { status: "disabled" }),
    ];
    const file = applyOverrides(base, rows, (slug) => skipped.push(slug));
    expect(skipped).toEqual(["acme/gone"]);
    expect(createCatalog(file).endpointsOf(LLAMA).map((e) => e.provider)).not.toContain("groq");
  });
});
