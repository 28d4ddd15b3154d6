/** Options: env mapping and agent profile validation. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defaultInternHostLimits, internHostOptionsFromEnv, loadAgentProfile, resolveLimits, validateAgentProfile } from "../../../src/host/options.js";

describe("internHostOptionsFromEnv", () => {
  it("reads PORTICO_HOST_* variables and leaves the rest to defaults", () => {
    const dir = mkdtempSync(join(tmpdir(), "portico-profile-"));
    const file = join(dir, "p.json");
    writeFileSync(file, JSON.stringify({ command: "codex-acp", args: ["-c", "x=1"], sandbox: "process", modes: { manual: "read-only" } }));
    const o = internHostOptionsFromEnv({
      PORTICO_HOST_MAX_CONCURRENT_RUNS: "3",
      PORTICO_HOST_LIVENESS_TIMEOUT_MS: "4000",
      PORTICO_HOST_CORE_URL: "http://core:50051",
      PORTICO_HOST_TOKEN: "pht-v1-abc",
      PORTICO_HOST_PROFILE: file,
      PORTICO_HOST_BWRAP: "off",
      PORTICO_HOST_RUN_AS: "1000:1000",
    });
    expect(o.limits).toEqual({ maxConcurrentRuns: 3, livenessTimeoutMs: 4000 });
    expect(o.coreUrl).toBe("http://core:50051");
    expect(o.token).toBe("pht-v1-abc");
    expect(o.profile).toEqual({ command: "codex-acp", args: ["-c", "x=1"], sandbox: "process", modes: { manual: "read-only" } });
    expect(o.bwrapPath).toBeNull();
    expect(o.runAs).toEqual({ uid: 1000, gid: 1000 });
    const limits = resolveLimits(o.limits);
    expect(limits.maxConcurrentRuns).toBe(3);
    expect(limits.maxPausedRuns).toBe(defaultInternHostLimits.maxPausedRuns);
    rmSync(dir, { recursive: true });
  });

  it("rejects malformed numbers", () => {
    expect(() => internHostOptionsFromEnv({ PORTICO_HOST_MAX_PAUSED_RUNS: "lots" })).toThrow(/PORTICO_HOST_MAX_PAUSED_RUNS/);
    expect(() => internHostOptionsFromEnv({ PORTICO_HOST_RUN_AS: "nobody" })).toThrow(/RUN_AS/);
    expect(() => internHostOptionsFromEnv({ PORTICO_HOST_MAX_AGENTS: "-1" })).toThrow(/^PORTICO_HOST_MAX_AGENTS must be a non-negative integer$/);
    expect(() => internHostOptionsFromEnv({ PORTICO_HOST_RUN_AS: "1:x" })).toThrow(/^PORTICO_HOST_RUN_AS must be uid:gid or off$/);
    expect(internHostOptionsFromEnv({ PORTICO_HOST_RUN_AS: "10:20", PORTICO_HOST_MAX_AGENTS: "" })).toMatchObject({ runAs: { uid: 10, gid: 20 }, limits: {} });
  });
});

describe("agent profile", () => {
  it("validates fields", () => {
    expect(validateAgentProfile({ command: "x", cwd: { fixed: "/srv/w" }, offerFs: false })).toEqual({ command: "x", cwd: { fixed: "/srv/w" }, offerFs: false });
    expect(() => validateAgentProfile({})).toThrow(/command/);
    expect(() => validateAgentProfile({ command: "x", sandbox: "docker" })).toThrow(/sandbox/);
    expect(() => validateAgentProfile({ command: "x", cwd: { fixed: "relative" } })).toThrow(/cwd/);
    expect(() => validateAgentProfile({ command: "x", env: { A: 1 } })).toThrow(/env/);
    // Exact messages: the field and its rule, never a library's wording.
    expect(() => validateAgentProfile({ command: "x", env: { A: 1 } })).toThrow(/^agent profile: env must be an object of strings$/);
    expect(() => validateAgentProfile({ command: "x", args: ["a", 2] })).toThrow(/^agent profile: args must be an array of strings$/);
    expect(() => validateAgentProfile({ command: "x", cwd: "home" })).toThrow(/^agent profile: cwd must be "session", "intern" or \{"fixed": "\/absolute\/path"\}$/);
    expect(() => validateAgentProfile({ command: "x", modes: { manual: 3 } })).toThrow(/^agent profile: modes\.manual must be a string$/);
    expect(() => validateAgentProfile({ command: "" })).toThrow(/^agent profile: command must be a non-empty string$/);
    expect(() => validateAgentProfile([])).toThrow(/^agent profile must be a JSON object$/);
    expect(validateAgentProfile({ command: "x", cwd: { fixed: "/w" }, modes: { manual: "m" }, sandbox: "none", extra: 1 })).toEqual({
      command: "x",
      cwd: { fixed: "/w" },
      modes: { manual: "m" },
      sandbox: "none",
    });
    expect(() => loadAgentProfile("/nonexistent/profile.json")).toThrow();
  });
});
