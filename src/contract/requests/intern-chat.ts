/**
 * The intern chat request (POST /api/v1/interns/{internId}/chat/completions and
 * InternsService.StreamChat), defined once: the gateway reads JSON types from it (a field of the wrong
 * JSON type is named, never guessed), the core checks the request's rules with it, and the OpenAPI
 * body schema is derived from it. What depends on the last message's role (the prompt or the answer)
 * is decided by the core after this definition holds.
 */
import { anything, array, boolean, isPlainObject, nullable, object, RuleViolation, string, validate, wirePath, z } from "./kit.js";

export const INTERN_MESSAGE_ROLES = ["system", "developer", "user", "assistant", "tool"] as const;
export const APPROVAL_MODES = ["manual", "self-drive"] as const;

/** Length in characters (code points), not UTF-16 units. */
const chars = (v: string) => [...v].length;

const internMessage = object(
  {
    role: string().refine((r) => (INTERN_MESSAGE_ROLES as readonly string[]).includes(r), {
      error: () => `must be one of ${INTERN_MESSAGE_ROLES.join(", ")}`,
    }),
    content: anything().meta({ description: "A string or an array of text parts (role user: the prompt; role tool: the answer)." }),
    tool_call_id: nullable(string()).meta({ description: "Role tool: the question answered (1 to 128 characters)." }),
    tool_calls: anything(),
  },
  { required: ["role"] },
);

export const InternChatRequest = object({
  stream: boolean()
    .refine((v) => v, { error: () => "must be true: this endpoint only streams" })
    .meta({ description: "Must be true." }),
  messages: array(internMessage, { min: 1 }).meta({ description: "At least 1 chat message; only the last one is read." }),
  approval_mode: nullable(
    string().refine((m) => (APPROVAL_MODES as readonly string[]).includes(m), { error: () => "must be manual or self-drive" }),
  ).meta({ description: "manual or self-drive (default self-drive); applies to the run this request starts." }),
  model: nullable(string().refine((m) => chars(m) >= 1 && chars(m) <= 256, { error: () => "must be 1 to 256 characters" })).meta({
    description: "1 to 256 characters; accepted and ignored.",
  }),
  session_id: nullable(
    string().refine((s) => chars(s) >= 1 && chars(s) <= 256 && !s.includes("\u0000"), {
      error: () => "must be 1 to 256 characters without NUL characters",
    }),
  ).meta({ description: "1 to 256 characters; required when the last message has role tool. Overrides the x-session-id header." }),
}).meta({
  description:
    "Intern chat request: messages (only the last is read; role user starts a run, role tool answers a question), " +
    "stream (must be true), approval_mode, model (ignored), session_id.",
});

export type InternChatRequest = z.output<typeof InternChatRequest>;

const REQUIRED = "is required";

/**
 * The first field whose JSON type is wrong (`body` when the body is not an object), or undefined.
 * Missing fields and values of the right type that break a rule are not "wrong types": the core
 * reports those with their own messages.
 */
export function wrongTypeField(body: unknown): string | undefined {
  if (!isPlainObject(body)) return "body";
  const res = InternChatRequest.safeParse(body);
  if (res.success) return undefined;
  for (const issue of res.error.issues) {
    if (issue.code === "invalid_type" && issue.message !== REQUIRED) {
      return wirePath(issue.path);
    }
  }
  return undefined;
}

/** Checks the request's rules; throws RuleViolation naming the first broken field. */
export function checkInternChatRequest(body: Record<string, unknown>): InternChatRequest {
  return validate(InternChatRequest, body);
}

export { RuleViolation };
