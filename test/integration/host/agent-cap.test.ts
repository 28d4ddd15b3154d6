/**
 * Bounded agents with real processes: 30 new sessions through a host whose cap is 3 leave at most 3
 * agent process groups alive at any time, and an evicted session comes back on its next prompt.
 */
import { mkdtempSync, rmSync } from "node:fs";
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
});
