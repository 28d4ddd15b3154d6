/**
 * Walks the run state machine's one transition table (RUN_ENDINGS in run-manager.ts): every cause
 * ends in a terminal state with an end reason and a finish the relay renders; the terminal host
 * events map onto it; the documented endings of the description's "Intern run" table hold.
 */
import { describe, expect, it } from "vitest";
import { TERMINAL_RUN_STATES } from "../../../src/core/interns/intern-repository.js";
import { causeOfEvent, endingOf, RUN_ENDINGS, type EndingCause } from "../../../src/core/interns/run-manager.js";
import type { RunEvent } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";

const SAMPLES: Record<EndingCause["on"], EndingCause[]> = {
  turnEnded: [{ on: "turnEnded", stopReason: "end_turn" }, { on: "turnEnded", stopReason: "" }],
  turnFailed: [{ on: "turnFailed", code: 0, reason: "", message: "", retryable: true }, { on: "turnFailed", code: 429, reason: "rate_limited", message: "slow down", retryable: true }],
  runEnded: [{ on: "runEnded", deadline: false }, { on: "runEnded", deadline: true }],
  severed: [{ on: "severed" }],
  overflow: [{ on: "overflow" }],
  deadline: [{ on: "deadline" }],
  clientGone: [{ on: "clientGone" }],
  cancelled: [{ on: "cancelled" }],
  notPending: [{ on: "notPending" }],
  hostLost: [{ on: "hostLost" }],
  ownerLost: [{ on: "ownerLost" }],
  startFailed: [{ on: "startFailed", reason: "timeout", clientGone: false }, { on: "startFailed", reason: "x", clientGone: true }, { on: "startFailed", reason: "stream_severed", clientGone: false }],
};

describe("the run transition table", () => {
  it("has a sample for every cause, and every cause ends the run in a terminal state", () => {
    expect(Object.keys(SAMPLES).sort()).toEqual(Object.keys(RUN_ENDINGS).sort());
    for (const causes of Object.values(SAMPLES)) {
      for (const cause of causes) {
        const end = endingOf(cause);
        expect(TERMINAL_RUN_STATES, JSON.stringify(cause)).toContain(end.state);
        expect(end.endReason).not.toBe("");
        if (end.finish.kind === "error") {
          expect(end.finish.code).toBeGreaterThanOrEqual(400);
          expect(end.finish.reason).not.toBe("");
          expect(end.finish.message).not.toBe("");
        }
      }
    }
  });

  it("matches the description's table", () => {
    expect(endingOf({ on: "turnEnded", stopReason: "" })).toEqual({ state: "finished", endReason: "end_turn", finish: { kind: "stop" } });
    // The agent's own "cancelled" (codex on reject_once, no session/cancel sent) is a normal end, not run_ended.
    expect(endingOf({ on: "turnEnded", stopReason: "cancelled" })).toEqual({ state: "finished", endReason: "agent_cancelled", finish: { kind: "stop" } });
    expect(endingOf({ on: "turnFailed", code: 0, reason: "", message: "", retryable: false })).toMatchObject({
      state: "failed",
      finish: { kind: "error", code: 502, reason: "turn_failed" },
    });
    expect(endingOf({ on: "runEnded", deadline: true })).toMatchObject({ state: "cancelled", endReason: "deadline", finish: { code: 410, reason: "run_ended" } });
    expect(endingOf({ on: "runEnded", deadline: false })).toMatchObject({ state: "ended", endReason: "run_ended", finish: { code: 410, reason: "run_ended" } });
    expect(endingOf({ on: "deadline" })).toMatchObject({ state: "cancelled", endReason: "deadline" });
    expect(endingOf({ on: "severed" })).toMatchObject({ state: "ended", endReason: "stream_severed", finish: { code: 502, reason: "stream_severed", retryable: true } });
    expect(endingOf({ on: "overflow" })).toMatchObject({ state: "failed", endReason: "attachment_failed", finish: { code: 410, reason: "attachment_failed" } });
    expect(endingOf({ on: "clientGone" })).toMatchObject({ state: "cancelled", endReason: "client_disconnected" });
    expect(endingOf({ on: "hostLost" })).toMatchObject({ state: "ended", endReason: "host_lost" });
    expect(endingOf({ on: "cancelled" })).toMatchObject({ state: "cancelled", endReason: "cancelled", finish: { code: 410, reason: "run_ended" } });
    expect(endingOf({ on: "startFailed", reason: "x", clientGone: true }).state).toBe("cancelled");
    expect(endingOf({ on: "startFailed", reason: "stream_severed", clientGone: false }).state).toBe("ended");
    expect(endingOf({ on: "startFailed", reason: "timeout", clientGone: false }).state).toBe("failed");
  });

  it("maps exactly the terminal host events onto causes", () => {
    const ev = (c: string, value: object) => ({ case: c, value }) as unknown as RunEvent["event"];
    expect(causeOfEvent(ev("turnEnded", { stopReason: "max_tokens" }))).toEqual({ on: "turnEnded", stopReason: "max_tokens" });
    expect(causeOfEvent(ev("runEnded", { deadline: true, cancelled: true }))).toEqual({ on: "runEnded", deadline: true });
    expect(causeOfEvent(ev("turnFailed", { code: 502, reason: "turn_failed", message: "m", retryable: false }))?.on).toBe("turnFailed");
    for (const other of ["content", "reasoning", "question", "model", "usage", "started", "rejected"]) {
      expect(causeOfEvent(ev(other, {}))).toBeUndefined();
    }
  });
});
