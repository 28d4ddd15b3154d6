/**
 * Stage "route" without a server (createPluginRoutingStage, src/core/chat/pipeline/plugins/index.ts), with the
 * built-in router plugins over the built-in catalog: the model it passes on (chosen among the models the caller can
 * route to), what it records, what it leaves to the plugins stage, and what it refuses (400 naming the field) before
 * the rest of the chain runs; and, with plugins of the test's own, a judge-naming plugin's `prepare` after the router.
 */
import { describe, expect, it } from "vitest";
import { ConnectError, Code } from "@connectrpc/connect";
import { compose, newCall, type ChatCall, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { createPluginRoutingStage, type Plugin, type PluginsDeps } from "../../../src/core/chat/pipeline/plugins/index.js";
import { createCatalog } from "../../../src/core/catalog/catalog.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";

const caller: Caller = {
  keyId: "k1", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1", isManagement: false, internsProgramme: false,
};
const catalog = createCatalog(BUILTIN_CATALOG);
/** The caller can route to OpenAI only. */
const routing: NonNullable<PluginsDeps["routing"]> = { catalog, brand: "portico", routableProviders: async () => new Set(["openai"]) };

/** Runs the stage on `body`; `passed` is the request the rest of the chain got (undefined: it did not run). */
async function run(body: Record<string, unknown>, deps: PluginsDeps = { routing }) {
  let passed: Record<string, unknown> | undefined;
  const rest: ChatStage = {
    name: "rest",
    async run(call) {
      passed = structuredClone(call.request) as Record<string, unknown>;
      return { kind: "completion", completion: {} as never };
    },
  };
  const call = newCall(caller, new AbortController().signal, false, { messages: [{ role: "user", content: "hi" }], ...body } as unknown as CanonicalRequest);
  const error = await compose([createPluginRoutingStage(deps), rest])(call).then(() => undefined, (e: unknown) => e);
  return { passed, call, error: error as ConnectError | undefined };
}
const refusal = (error: ConnectError | undefined) => {
  expect(error).toBeInstanceOf(ConnectError);
  expect(error!.code).toBe(Code.InvalidArgument);
  return { message: error!.rawMessage, field: errorDetailOf(error!)?.field };
};
const routable = (slug: unknown) => typeof slug === "string" && catalog.endpointsOf(slug).some((e) => e.provider === "openai");

describe("route stage", () => {
  it("passes a request without router entries on unchanged, recording nothing; other entries are left to the plugins stage", async () => {
    for (const plugins of [undefined, [], [{ id: "response-healing" }, { id: "not-a-plugin" }], [{ id: "auto-router", enabled: false }]]) {
      const body = { model: "openai/gpt-4o", ...(plugins ? { plugins } : {}) };
      const { passed, call, error } = await run(body);
      expect(error).toBeUndefined();
      expect(passed).toEqual({ messages: [{ role: "user", content: "hi" }], ...body });
      expect(call.track.plugins).toEqual([]);
    }
  });

  it("`<brand>/auto` runs auto-router with its defaults: a routable, rated model is passed on and the choice recorded", async () => {
    const { passed, call, error } = await run({ model: "Portico/Auto" });
    expect(error).toBeUndefined();
    expect(routable(passed!.model)).toBe(true);
    expect(catalog.model(passed!.model as string)!.quality).toBeDefined();
    expect(call.request.model).toBe(passed!.model);
    expect(call.track.plugins).toHaveLength(1);
    expect(call.track.plugins[0]).toMatchObject({ id: "auto-router", trigger: "portico/auto", chosen: passed!.model, cost_quality_tradeoff: 7 });
    // Without routing (no catalog to choose from) the model is not a router's: passed on as named.
    const bare = await run({ model: "portico/auto" }, {});
    expect(bare.passed!.model).toBe("portico/auto");
    expect(bare.call.track.plugins).toEqual([]);
  });

  it("a router entry chooses among its allowed models; the entry's report is recorded", async () => {
    const { passed, call, error } = await run({ model: "openai/gpt-4o", plugins: [{ id: "auto-router", allowed_models: ["openai/gpt-4o-mini", "anthropic/*"] }] });
    expect(error).toBeUndefined();
    // Anthropic is not routable for this caller: the one allowed OpenAI model is chosen.
    expect(passed!.model).toBe("openai/gpt-4o-mini");
    expect(call.track.plugins).toEqual([expect.objectContaining({ id: "auto-router", chosen: "openai/gpt-4o-mini", considered: 1 })]);
    expect(passed!.plugins).toEqual([{ id: "auto-router", allowed_models: ["openai/gpt-4o-mini", "anthropic/*"] }]);
  });

  it("refuses, before the rest of the chain, a second router, a router with `models`, pin_model, and allowed models it cannot route to", async () => {
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ model: "openai/gpt-4o", plugins: [{ id: "auto-router" }, { id: "pareto-router" }] }, "plugins[1].id", /already chooses the model; give one router plugin per request/],
      [{ model: "portico/auto", plugins: [{ id: "response-healing" }, { id: "auto-router" }, { id: "auto-beta-router" }] }, "plugins[2].id", /^plugins\[2\].id "auto-beta-router": plugins\[1\] \("auto-router"\) already chooses/],
      [{ model: "openai/gpt-4o", models: ["openai/gpt-4o"], plugins: [{ id: "auto-router" }] }, "models", /models cannot be combined with plugins\[0\]/],
      [{ model: "portico/auto", models: ["openai/gpt-4o"] }, "models", /models cannot be combined with model \("auto-router"\)/],
      [{ model: "openai/gpt-4o", plugins: [{ id: "auto-router", pin_model: true }] }, "plugins[0].pin_model", /pin_model is not supported/],
      [{ model: "openai/gpt-4o", plugins: [{ id: "auto-router", allowed_models: ["anthropic/*"] }] }, "plugins[0].allowed_models", /no catalog model you can route to is left to choose from/],
    ];
    for (const [body, field, message] of cases) {
      const { passed, call, error } = await run(body);
      expect(passed, field).toBeUndefined();
      const r = refusal(error);
      expect(r.field).toBe(field);
      expect(r.message).toMatch(message);
      expect(call.request.model).toBe(body.model);
    }
  });

  describe("with the test's own plugins", () => {
    const order: string[] = [];
    const router: Plugin = {
      id: "test-router",
      order: 0,
      async route(call: ChatCall, run) {
        order.push(`route ${run.field}`);
        call.request.model = "openai/chosen";
        Object.assign(run.report, { chosen: "openai/chosen" });
      },
    };
    const judge: Plugin = {
      id: "test-judge",
      order: 0,
      prepare(call: ChatCall, run) {
        order.push(`prepare ${run.field} after model ${String(call.request.model)}`);
        call.request.model = String(run.options.model ?? "openai/judge");
      },
    };
    const deps: PluginsDeps = { plugins: [router, judge] };

    it("a plugin's `prepare` runs after the router, before the rest of the chain; its report is left to the plugins stage", async () => {
      order.length = 0;
      const { passed, call, error } = await run({ model: "openai/gpt-4o", plugins: [{ id: "test-judge" }, { id: "test-router" }] }, deps);
      expect(error).toBeUndefined();
      expect(order).toEqual(["route plugins[1]", "prepare plugins[0] after model openai/chosen"]);
      expect(passed!.model).toBe("openai/judge");
      expect(call.track.plugins).toEqual([{ id: "test-router", chosen: "openai/chosen" }]);
    });

    it("a judge named beside a router is refused before either runs", async () => {
      order.length = 0;
      const { passed, error } = await run({ model: "openai/gpt-4o", plugins: [{ id: "test-router" }, { id: "test-judge", model: "openai/gpt-4o" }] }, deps);
      expect(passed).toBeUndefined();
      expect(order).toEqual([]);
      const r = refusal(error);
      expect(r.field).toBe("plugins[1].model");
      expect(r.message).toMatch(/names the test-judge judge, but plugins\[0\] \("test-router"\) already chooses the model/);
      // Alone, the judge names the model.
      expect((await run({ model: "openai/gpt-4o", plugins: [{ id: "test-judge", model: "openai/gpt-4o" }] }, deps)).passed!.model).toBe("openai/gpt-4o");
    });
  });
});
