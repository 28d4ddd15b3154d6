/**
 * In-stream errors carry a Reason of the one error table (portico.errors.v1.Reason); peers of the
 * previous version send only an HTTP number and a wire string. Each receiver maps a known number
 * and string to its reason, and the public status and wire string derive from the table.
 */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { Reason, reasonFromLegacy, ruleOf } from "../../../src/contract/reasons.js";
import { causeOfEvent, endingOf, turnFailedReason } from "../../../src/core/interns/run-endings.js";
import { rejectedReason } from "../../../src/core/interns/run-admission.js";
import { streamErrorReason, toChunk } from "../../../src/gateway/presenters/intern-chunks.js";
import { RunEventSchema, RunRejectedSchema, TurnFailedSchema } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { StreamChatResponseSchema, StreamErrorSchema } from "../../../src/gen/portico/interns/v1/interns_service_pb.js";

const ctx = { id: "chatcmpl-x", created: 1, brand: "service" };

describe("reasons from a peer of the previous version (HTTP number and wire string only)", () => {
  it("a host's TurnFailed without reason_value maps its code and string to a reason", () => {
    const legacy = (code: number, reason: string) => turnFailedReason(create(TurnFailedSchema, { code, reason, message: "m" }));
    expect(legacy(502, "turn_failed")).toBe(Reason.TURN_FAILED);
    expect(legacy(410, "attachment_failed")).toBe(Reason.ATTACHMENT_FAILED);
    expect(legacy(503, "busy")).toBe(Reason.HOST_BUSY);
    // "busy" from a host is capacity, whatever number came with it.
    expect(legacy(409, "busy")).toBe(Reason.HOST_BUSY);
    expect(legacy(429, "rate_limited")).toBe(Reason.RATE_LIMITED);
    // Nothing known: the number decides, else turn_failed.
    expect(legacy(0, "")).toBe(Reason.TURN_FAILED);
    expect(legacy(410, "something_new")).toBe(Reason.RUN_ENDED);
    expect(legacy(504, "something_new")).toBe(Reason.TIMEOUT);
    expect(legacy(418, "something_new")).toBe(Reason.TURN_FAILED);
  });

  it("a TurnFailed with reason_value is read by its reason; an unknown value falls back to the numbers", () => {
    expect(turnFailedReason(create(TurnFailedSchema, { code: 502, reason: "turn_failed", reasonValue: Reason.ATTACHMENT_FAILED }))).toBe(Reason.ATTACHMENT_FAILED);
    expect(turnFailedReason(create(TurnFailedSchema, { code: 503, reason: "busy", reasonValue: 999 as Reason }))).toBe(Reason.HOST_BUSY);
  });

  it("the run ends with the table's status and wire string, from an old host and a new one alike", () => {
    const ev = (value: object) => create(RunEventSchema, { runId: "r", event: { case: "turnFailed", value: create(TurnFailedSchema, value) } }).event;
    const old = endingOf(causeOfEvent(ev({ code: 410, reason: "attachment_failed", message: "too much", retryable: false }))!);
    const cur = endingOf(causeOfEvent(ev({ code: 410, reason: "attachment_failed", message: "too much", retryable: false, reasonValue: Reason.ATTACHMENT_FAILED }))!);
    expect(old).toEqual(cur);
    expect(old).toMatchObject({ state: "failed", endReason: "attachment_failed", finish: { kind: "error", code: 410, reason: "attachment_failed", reasonValue: Reason.ATTACHMENT_FAILED } });
  });

  it("a host's RunRejected without reason_value maps its string", () => {
    expect(rejectedReason(create(RunRejectedSchema, { reason: "busy" }))).toBe(Reason.HOST_BUSY);
    expect(rejectedReason(create(RunRejectedSchema, { reason: "timeout" }))).toBe(Reason.TIMEOUT);
    expect(rejectedReason(create(RunRejectedSchema, { reason: "turn_failed" }))).toBe(Reason.TURN_FAILED);
    expect(rejectedReason(create(RunRejectedSchema, { reason: "whatever" }))).toBe(Reason.TURN_FAILED);
    expect(rejectedReason(create(RunRejectedSchema, { reason: "turn_failed", reasonValue: Reason.TIMEOUT }))).toBe(Reason.TIMEOUT);
  });

  it("a core's StreamError without reason_value maps its code and string; the chunk is the same either way", () => {
    expect(streamErrorReason(create(StreamErrorSchema, { code: 410, reason: "run_ended" }))).toBe(Reason.RUN_ENDED);
    expect(streamErrorReason(create(StreamErrorSchema, { code: 502, reason: "stream_severed" }))).toBe(Reason.STREAM_SEVERED);
    expect(streamErrorReason(create(StreamErrorSchema, { code: 503, reason: "busy" }))).toBe(Reason.HOST_BUSY);
    expect(streamErrorReason(create(StreamErrorSchema, { code: 409, reason: "busy" }))).toBe(Reason.SESSION_BUSY);
    expect(streamErrorReason(undefined)).toBe(Reason.TURN_FAILED);
    const chunk = (error: object) =>
      toChunk(create(StreamChatResponseSchema, { model: "m", event: { case: "finish", value: { reason: "error", error: create(StreamErrorSchema, error) } } }), ctx);
    const old = chunk({ code: 410, message: "The intern ended the run.", reason: "run_ended", retryable: false });
    const cur = chunk({ code: 410, message: "The intern ended the run.", reason: "run_ended", retryable: false, reasonValue: Reason.RUN_ENDED });
    expect(cur).toEqual(old);
    expect(old).toMatchObject({ kind: "chunk", chunk: { error: { code: 410, metadata: { reason: "run_ended", retryable: false } } } });
  });

  it("current readers never take the deprecated code (nor the string) when reason_value is set: a contradicting pair changes nothing", () => {
    // StreamError.code and TurnFailed.code stay filled for peers of earlier versions (proto comments); a reader of this
    // version decides by reason_value alone, and the status comes from the table.
    for (const reason of [Reason.RUN_ENDED, Reason.STREAM_SEVERED, Reason.HOST_BUSY, Reason.ATTACHMENT_FAILED]) {
      expect(streamErrorReason(create(StreamErrorSchema, { code: 500, reason: "internal_error", reasonValue: reason }))).toBe(reason);
      expect(turnFailedReason(create(TurnFailedSchema, { code: 500, reason: "internal_error", reasonValue: reason }))).toBe(reason);
      const out = toChunk(
        create(StreamChatResponseSchema, { model: "m", event: { case: "finish", value: { reason: "error", error: create(StreamErrorSchema, { code: 500, reason: "internal_error", message: "x", reasonValue: reason }) } } }),
        ctx,
      );
      expect(out).toMatchObject({ kind: "chunk", chunk: { error: { code: ruleOf(reason).status, metadata: { reason: ruleOf(reason).wire } } } });
    }
  });

  it("reasonFromLegacy prefers the entry with both the string and the number", () => {
    expect(reasonFromLegacy(409, "conflict", Reason.INTERNAL_ERROR)).toBe(Reason.CONFLICT);
    expect(ruleOf(Reason.RUN_ENDED)).toMatchObject({ wire: "run_ended", status: 410, retryable: false });
  });
});
