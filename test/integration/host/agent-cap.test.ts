/**
 * Bounded agents with real processes: 30 new sessions through a host whose cap is 3 leave at most 3
 * agent process groups alive at any time, and an evicted session comes back on its next prompt.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import { create } from "@bufbuild/protobuf";
import { StartRunSchema, type RunEvent } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { createHostEngine, type HostEngine } from "../../../src/host/engine.js";
import { resolveLimits } from "../../../src/host/options.js";
import { scriptedAgentCommand } from "../../fixtures/scripted-agent.js";
import { groupAlive, REPO_ROOT, waitUntil } from "./helpers.js";

let engine: HostEngine | undefined;
let workRoot: string | undefined;
afterEach(async () => {
  await engine?.close();
  engine = undefined;
  if (workRoot) rmSync(workRoot, { recursive: true, force: true });
});

describe("agent cap with real agent processes", () => {
  it("30 new sessions leave at most the cap of agents alive; an evicted session answers again", async () => {
    const cap = 3;
    workRoot = mkdtempSync(join(tmpdir(), "portico-cap-"));
    const events: RunEvent[] = [];
    const e = createHostEngine({
      profile: { ...scriptedAgentCommand(REPO_ROOT), inheritEnv: "all" },
      workRoot,
      limits: resolveLimits({ maxAgents: cap, agentStartBudgetMs: 60_000 }),
      logger: pino({ level: "silent" }),
      runAs: undefined,
      bwrap: undefined,
      hostVersion: "test",
      onReadable: () => {
        for (let ev = e.takeEvent(); ev; ev = e.takeEvent()) events.push(ev);
      },
      onCapacity: () => {},
    });
    engine = e;
    const pids = new Set<number>();
    const script = JSON.stringify({ steps: [{ content: "done" }] });
    const ended = (runId: string): boolean => events.some((x) => x.runId === runId && (x.event.case === "turnEnded" || x.event.case === "rejected" || x.event.case === "turnFailed"));
    for (let i = 0; i < 30; i++) {
      e.startRun(create(StartRunSchema, { runId: `r${i}`, sessionId: `s${i}`, prompt: script }));
      await waitUntil(() => ended(`r${i}`), 60_000, `run r${i}`);
      expect(events.filter((x) => x.runId === `r${i}`).at(-1)!.event.case).toBe("turnEnded");
      for (const s of e.sessions()) if (s.agentPid) pids.add(s.agentPid);
      const alive = [...pids].filter(groupAlive);
      expect(alive.length).toBeLessThanOrEqual(cap);
    }
    expect(pids.size).toBe(30);
    expect([...pids].filter(groupAlive).length).toBeLessThanOrEqual(cap);
    // s0 was evicted long ago: its next prompt starts an agent again
    e.startRun(create(StartRunSchema, { runId: "again", sessionId: "s0", prompt: script }));
    await waitUntil(() => ended("again"), 60_000, "run again");
    expect(events.filter((x) => x.runId === "again").at(-1)!.event.case).toBe("turnEnded");
    expect(e.sessions().filter((s) => s.agentAlive).length).toBeLessThanOrEqual(cap);
    await e.close();
    engine = undefined;
    expect([...pids].filter(groupAlive)).toEqual([]);
  }, 240_000);

  it("an evicted idle agent that ignores end of input is stopped at once, not after the cancel grace", async () => {
    workRoot = mkdtempSync(join(tmpdir(), "portico-cap-"));
    const agentLog = join(workRoot, "agent.log");
    const events: RunEvent[] = [];
    const e = createHostEngine({
      profile: {
        ...scriptedAgentCommand(REPO_ROOT),
        inheritEnv: "all",
        // Like claude-code-acp and codex-acp: end of input does not end the agent.
        env: { SCRIPTED_AGENT_CONFIG: JSON.stringify({ ignoreEof: true }), SCRIPTED_AGENT_LOG: agentLog },
      },
      workRoot,
      limits: resolveLimits({ maxAgents: 1, agentStartBudgetMs: 60_000, cancelGraceMs: 30_000 }),
      logger: pino({ level: "silent" }),
      runAs: undefined,
      bwrap: undefined,
      hostVersion: "test",
      onReadable: () => {
        for (let ev = e.takeEvent(); ev; ev = e.takeEvent()) events.push(ev);
      },
      onCapacity: () => {},
    });
    engine = e;
    const ended = (runId: string): boolean => events.some((x) => x.runId === runId && (x.event.case === "turnEnded" || x.event.case === "rejected" || x.event.case === "turnFailed"));
    e.startRun(create(StartRunSchema, { runId: "a", sessionId: "sa", prompt: "one" }));
    await waitUntil(() => ended("a"), 60_000, "run a");
    // A second session at the cap evicts the idle agent of the first.
    e.startRun(create(StartRunSchema, { runId: "b", sessionId: "sb", prompt: "two" }));
    await waitUntil(() => ended("b"), 60_000, "run b");
    expect(events.filter((x) => x.runId === "b").at(-1)!.event.case).toBe("turnEnded");
    // The evicted agent saw end of input, then SIGTERM: the host did not wait out a grace (2 s before) for an
    // agent that had no run to protect. The bound leaves a loaded machine room and stays under that grace.
    const at = (what: string): number => Number(new RegExp(`^${what} (\\d+)$`, "m").exec(readFileSync(agentLog, "utf8"))?.[1]);
    expect(at("eof")).toBeGreaterThan(0);
    expect(at("term")).toBeGreaterThan(0);
    expect(at("term") - at("eof")).toBeLessThan(1_500);
  }, 120_000);
});
