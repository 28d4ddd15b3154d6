/**
 * Limits every JSON request body must meet before any route sees it, checked once, right after
 * parsing, the same way in `portico serve` and in split deployments:
 * - nesting at most MAX_JSON_DEPTH levels (deeper structures exhaust protobuf's recursion limit on the
 *   way to the core, and the stack of recursive validators);
 * - every string, keys included, well-formed Unicode (a lone UTF-16 surrogate such as "\ud800" cannot
 *   be stored as UTF-8 and is refused rather than silently replaced);
 * - no `__proto__` key (the gateway's JSON parser refuses them before this check; a body that reaches the
 *   core as JSON text, `body_json`, is checked here).
 * Used by the gateway for every parsed body and by the core for bodies sent as JSON text (parseJsonObjectText).
 * The walk is iterative, so a hostile body cannot overflow the stack here either.
 */

/** Deepest accepted nesting of objects and arrays in a request body (the body itself is level 1). */
export const MAX_JSON_DEPTH = 32;

export interface JsonInputProblem {
  /** Path of the offending value, e.g. `messages[0].content` (`body` for the top level). */
  field: string;
  message: string;
}

/** A value met by the walk: its parent and key, so that a path is only spelled out for the problem reported. */
interface Visit {
  value: unknown;
  parent: Visit | undefined;
  key: string | number;
  depth: number;
}

function pathOf(v: Visit | undefined): string {
  if (!v || !v.parent) return "";
  const parent = pathOf(v.parent);
  const key = v.key;
  if (typeof key === "number") return `${parent}[${key}]`;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? (parent ? `${parent}.${key}` : key) : `${parent}[${JSON.stringify(key.toWellFormed())}]`;
}

export function checkJsonInput(body: unknown, maxDepth = MAX_JSON_DEPTH): JsonInputProblem | undefined {
  const stack: Visit[] = [{ value: body, parent: undefined, key: "", depth: 0 }];
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const value = visit.value;
    if (typeof value === "string") {
      if (!value.isWellFormed()) return problem(visit, (at) => `${at} contains invalid Unicode (a lone surrogate)`);
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    const depth = visit.depth + 1;
    if (depth > maxDepth) return problem(visit, (at) => `Request body nests deeper than ${maxDepth} levels at ${at}`);
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], parent: visit, key: i, depth });
      continue;
    }
    for (const key of Object.keys(value)) {
      const child: Visit = { value: (value as Record<string, unknown>)[key], parent: visit, key, depth };
      if (!key.isWellFormed()) return problem(child, () => `A key in ${pathOf(visit) || "body"} contains invalid Unicode (a lone surrogate)`);
      if (key === "__proto__") return problem(child, () => `A key in ${pathOf(visit) || "body"} is "__proto__"`);
      stack.push(child);
    }
  }
  return undefined;
}

/** The problem at `visit` (`body` when it is the body itself). */
function problem(visit: Visit, message: (at: string) => string): JsonInputProblem {
  const at = pathOf(visit) || "body";
  return { field: at, message: message(at) };
}

/**
 * A request body sent as JSON text (the chat services' `body_json`): the JSON object it holds, checked as the
 * gateway checks a parsed body (checkJsonInput), or the problem with it (`field` names the text's field).
 */
export function parseJsonObjectText(text: string, field: string): { value: Record<string, unknown> } | { problem: JsonInputProblem } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { problem: { field, message: `${field} is not valid JSON: ${err instanceof Error ? err.message : String(err)}` } };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return { problem: { field, message: `${field} must be a JSON object` } };
  const found = checkJsonInput(value);
  return found ? { problem: { field: found.field === "body" ? field : `${field}${found.field.startsWith("[") ? "" : "."}${found.field}`, message: `${field}: ${found.message}` } } : { value: value as Record<string, unknown> };
}
