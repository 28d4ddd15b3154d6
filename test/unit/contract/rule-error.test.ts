/**
 * One RuleViolation → error mapping (src/lib/service-error.ts `ruleError`): a broken request rule met by the
 * gateway's route contract (query, path, body), by the core's `checkRules` and by the catalog's management
 * layer (src/core/catalog/overrides.ts) gives the same error — 400 bad_request, the violation's message, its
 * wire path as `field` — and so the same public envelope.
 */
import { describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { addOrReplaceModel, changeEndpoint } from "../../../src/core/catalog/overrides.js";
import { checkRules } from "../../../src/core/errors.js";
import { PutCatalogModelRequest, UpdateCatalogEndpointRequest } from "../../../src/contract/requests/catalog.js";
import { validate } from "../../../src/contract/requests/kit.js";
import { RequestParameters } from "../../../src/contract/requests/parameters.js";
import { publicErrorFromConnect } from "../../../src/gateway/errors.js";
import { contractRoute } from "../../../src/gateway/schemas.js";

const LLAMA = "meta-llama/llama-3.3-70b-instruct";
const ctx = { base: BUILTIN_CATALOG, rows: [], serves: () => true };

function caught(run: () => unknown): ConnectError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return err as ConnectError;
  }
  throw new Error("no error");
}

/** The gateway's validator for one part of an operation's request. */
function gatewayError(operationId: string, httpPart: "body" | "querystring" | "params", data: unknown, body?: Parameters<typeof contractRoute>[1]): ConnectError {
  const { validatorCompiler } = contractRoute(operationId, body);
  const result = validatorCompiler({ httpPart, schema: {}, method: "GET", url: "/" } as never)(data) as { error?: unknown };
  expect(result.error).toBeInstanceOf(ConnectError);
  return result.error as ConnectError;
}

const envelope = (err: ConnectError) => publicErrorFromConnect(err);

describe("one RuleViolation → error mapping", () => {
  it("a catalog body: the gateway's contract, the core's checkRules and the catalog's management layer give the same error", () => {
    for (const [operationId, def, body, core] of [
      ["putCatalogModel", PutCatalogModelRequest, { name: 1 }, (b: unknown) => addOrReplaceModel(ctx, LLAMA, b)],
      ["updateCatalogEndpoint", UpdateCatalogEndpointRequest, { pricing: { prompt: "cheap" } }, (b: unknown) => changeEndpoint(ctx, LLAMA, "groq", b)],
    ] as const) {
      const viaCatalog = caught(() => core(body));
      const viaRules = caught(() => checkRules(() => validate(def, body)));
      const viaGateway = gatewayError(operationId, "body", body, def);
      const expected = envelope(viaRules);
      expect(expected.status).toBe(400);
      expect(expected.body.error.metadata).toMatchObject({ reason: "bad_request", field: expect.stringMatching(/^(name|pricing\.prompt)$/) });
      expect(envelope(viaCatalog)).toEqual(expected);
      expect(envelope(viaGateway)).toEqual(expected);
      expect([viaCatalog.code, viaGateway.code]).toEqual([viaRules.code, viaRules.code]);
    }
  });

  it("query and path parameters: the same envelope as the core's for the same definition, field named by the parameter", () => {
    const query = RequestParameters.listModels!.query!;
    const bad = gatewayError("listModels", "querystring", { limit: "1001" });
    expect(envelope(bad)).toEqual(envelope(caught(() => checkRules(() => validate(query.shape.limit!, 1001, "limit")))));
    expect(envelope(bad).body.error).toEqual({
      code: 400,
      message: "limit must be an integer between 1 and 1000, got 1001",
      metadata: { reason: "bad_request", retryable: false, field: "limit" },
    });
    // An unknown key of a closed query goes through the same mapping (same envelope keys, field the key).
    const unknown = envelope(gatewayError("getActivity", "querystring", { bogus: "1" }));
    expect(unknown.body.error.metadata).toEqual({ reason: "bad_request", retryable: false, field: "bogus" });
    const path = RequestParameters.getCatalogModel!.path!;
    const badPath = gatewayError("getCatalogModel", "params", { author: "", slug: "x" });
    expect(envelope(badPath)).toEqual(envelope(caught(() => checkRules(() => validate(path, { author: "", slug: "x" })))));
    expect(envelope(badPath).body.error.metadata).toMatchObject({ field: "author" });
  });
});
