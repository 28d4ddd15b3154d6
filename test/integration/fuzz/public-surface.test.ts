/**
 * A short fuzzing run of every public HTTP operation and gRPC method (the long run is `npm run fuzz`).
 * The seed is printed with any finding so a failure can be replayed with PORTICO_FUZZ_SEED.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { fuzzGrpc, fuzzOperation, operationsOf, type Operation } from "../../fuzz/public-surface.js";

const RUNS = Number(process.env.PORTICO_FUZZ_RUNS ?? 60);
const SEED = Number(process.env.PORTICO_FUZZ_SEED ?? Date.now() % 2 ** 31);
const PROVIDERS = (process.env.PORTICO_FUZZ_PROVIDERS ?? "sqlite").split(",") as Array<"sqlite" | "postgresql">;

describe.each(PROVIDERS)(`fuzzing the public surface on %s (seed ${SEED}, ${RUNS} runs per operation)`, (provider) => {
  let h: Harness;
  let ops: Operation[] = [];
  beforeAll(async () => {
    h = await startHarness({ provider, env: { PORTICO_INTERN_RATE_LIMIT: "1000000" } });
    ops = operationsOf((await api(h, "GET", "/openapi.json")).json);
  });
  afterAll(() => h?.close());

  it("every HTTP operation answers in the envelope, without 5xx or echoed secrets", async () => {
    expect(ops.length).toBeGreaterThanOrEqual(12);
    const findings = [];
    for (const op of ops) findings.push(...(await fuzzOperation(h, op, RUNS, SEED)));
    expect(findings, `seed ${SEED}`).toEqual([]);
  }, 3_600_000);

  it("every gRPC method refuses random bytes without INTERNAL or UNKNOWN", async () => {
    expect(await fuzzGrpc(h, RUNS * 4, SEED), `seed ${SEED}`).toEqual([]);
  }, 3_600_000);
});
