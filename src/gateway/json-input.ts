/**
 * Limits every JSON request body must meet before any route sees it, checked once, right after
 * parsing, the same way in `portico serve` and in split deployments:
 * - nesting at most MAX_JSON_DEPTH levels (deeper structures exhaust protobuf's recursion limit on the
 *   way to the core, and the stack of recursive validators);
 * - every string, keys included, well-formed Unicode (a lone UTF-16 surrogate such as "\ud800" cannot
 *   be stored as UTF-8 and is refused rather than silently replaced).
 * The walk is iterative, so a hostile body cannot overflow the stack here either.
 */

/** Deepest accepted nesting of objects and arrays in a request body (the body itself is level 1). */
export const MAX_JSON_DEPTH = 32;

export interface JsonInputProblem {
  /** Path of the offending value, e.g. `messages[0].content` (`body` for the top level). */
  field: string;
  message: string;
}

function pathOf(parent: string, key: string | number): string {
  if (typeof key === "number") return `${parent}[${key}]`;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? (parent ? `${parent}.${key}` : key) : `${parent}[${JSON.stringify(key.toWellFormed())}]`;
}

export function checkJsonInput(body: unknown, maxDepth = MAX_JSON_DEPTH): JsonInputProblem | undefined {
  const stack: Array<{ value: unknown; path: string; depth: number }> = [{ value: body, path: "", depth: 0 }];
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === "string") {
      if (!value.isWellFormed()) return { field: path || "body", message: `${path || "body"} contains invalid Unicode (a lone surrogate)` };
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    const level = depth + 1;
    if (level > maxDepth) {
      return { field: path || "body", message: `Request body nests deeper than ${maxDepth} levels at ${path || "body"}` };
    }
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], path: pathOf(path, i), depth: level });
      continue;
    }
    for (const key of Object.keys(value)) {
      if (!key.isWellFormed()) return { field: pathOf(path, key), message: `A key in ${path || "body"} contains invalid Unicode (a lone surrogate)` };
      stack.push({ value: (value as Record<string, unknown>)[key], path: pathOf(path, key), depth: level });
    }
  }
  return undefined;
}
