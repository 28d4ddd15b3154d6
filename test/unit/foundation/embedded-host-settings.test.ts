/**
 * `portico serve`'s embedded host takes the PORTICO_HOST_* limits, PORTICO_HOST_BWRAP and
 * PORTICO_HOST_RUN_AS from the configuration (they were ignored: issue 25); the variables that only
 * `portico intern-host` reads are listed so `serve` can say so.
 */
import { describe, expect, it } from "vitest";
import { embeddedHostOptions } from "../../../src/cli/embedded-host.js";
import { ConfigError, loadConfig } from "../../../src/config.js";
import { defaultInternHostLimits, resolveLimits } from "../../../src/host/options.js";
import { HOST_LIMIT_VARIABLES } from "../../../src/lib/host-settings.js";

describe("the embedded host's PORTICO_HOST_* settings", () => {
  it("gives every documented limit variable to the embedded host", () => {
    const env: Record<string, string> = {};
    const expected: Record<string, number> = {};
    Object.entries(HOST_LIMIT_VARIABLES).forEach(([name, limit], i) => {
      // A value unlike every default, different for each limit.
      const value = 7 + i * 13;
      env[name] = String(value);
      expected[limit] = value;
    });
    expect(Object.keys(env)).toHaveLength(18);
    const limits = resolveLimits(embeddedHostOptions(loadConfig(env)).limits);
    for (const [limit, value] of Object.entries(expected)) {
      expect({ limit, value: limits[limit as keyof typeof limits] }).toEqual({ limit, value });
      expect(value).not.toBe(defaultInternHostLimits[limit as keyof typeof defaultInternHostLimits]);
    }
  });

  it("passes PORTICO_HOST_BWRAP and PORTICO_HOST_RUN_AS, and keeps the host's defaults when they are unset", () => {
    expect(embeddedHostOptions(loadConfig({ PORTICO_HOST_BWRAP: "off", PORTICO_HOST_RUN_AS: "off" }))).toEqual({ limits: {}, bwrapPath: null, runAs: null });
    expect(embeddedHostOptions(loadConfig({ PORTICO_HOST_BWRAP: "/opt/bin/bwrap", PORTICO_HOST_RUN_AS: "1000:1001" }))).toEqual({
      limits: {},
      bwrapPath: "/opt/bin/bwrap",
      runAs: { uid: 1000, gid: 1001 },
    });
    // Unset: no override, so the host looks bwrap up on PATH and runs agents as 65534 when root.
    expect(embeddedHostOptions(loadConfig({}))).toEqual({ limits: {} });
  });

  it("lists the variables only `portico intern-host` reads, and refuses a malformed value naming it", () => {
    const cfg = loadConfig({ PORTICO_HOST_PROFILE: "/etc/agent.json", PORTICO_HOST_CORE_URL: "http://core:50051", PORTICO_HOST_WORK_ROOT: "" });
    expect(cfg.embeddedHostSettings.ignored).toEqual(["PORTICO_HOST_CORE_URL", "PORTICO_HOST_PROFILE"]);
    expect(() => loadConfig({ PORTICO_HOST_MAX_CONCURRENT_RUNS: "many" })).toThrow(ConfigError);
    expect(() => loadConfig({ PORTICO_HOST_MAX_CONCURRENT_RUNS: "many" })).toThrow(/^PORTICO_HOST_MAX_CONCURRENT_RUNS must be a non-negative integer$/);
    expect(() => loadConfig({ PORTICO_HOST_RUN_AS: "nobody" })).toThrow(/^PORTICO_HOST_RUN_AS must be uid:gid or off$/);
  });
});
