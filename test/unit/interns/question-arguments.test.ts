/** The provide_input arguments object: the core's own fields first, a host's extra fields bounded. */
import { describe, expect, it } from "vitest";
import { MAX_ARGUMENTS_BYTES, questionArguments } from "../../../src/core/interns/sessions.js";

describe("questionArguments", () => {
  const deadline = new Date("2026-01-01T00:00:00.000Z");

  it("keeps the core's fields and adds the host's tool, which cannot replace them", () => {
    const tool = { title: "ls", kind: "execute", command: "ls", input: { command: "ls" } };
    expect(questionArguments({ kind: "permission", operation: "shell", options: ["allow_once"], extra: { tool, kind: "spoofed", options: [] } }, deadline)).toEqual({
      kind: "permission",
      operation: "shell",
      options: ["allow_once"],
      deadline_at: "2026-01-01T00:00:00.000Z",
      tool,
    });
  });

  it("leaves out a host field that would take the object past the bound", () => {
    const args = questionArguments(
      { kind: "permission", options: ["allow_once"], extra: { tool: { command: "x".repeat(MAX_ARGUMENTS_BYTES) }, note: "kept" } },
      deadline,
    );
    expect(args).toEqual({ kind: "permission", operation: null, options: ["allow_once"], deadline_at: "2026-01-01T00:00:00.000Z", note: "kept" });
  });
});
