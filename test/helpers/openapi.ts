/**
 * Checks real gateway responses against the OpenAPI document the gateway serves.
 */
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

export interface OpenApiDoc {
  paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> }>>;
}

function templateMatches(template: string, path: string): boolean {
  const re = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\\\{[^}]+\\\}|\{[^}]+\}/g, "[^/]+")}$`);
  return re.test(path);
}

/** Returns the validation errors of `body` against the documented schema (empty = conforms). */
export function validateAgainstOpenApi(doc: OpenApiDoc, method: string, path: string, status: number, body: unknown): string[] {
  const pathOnly = path.split("?")[0]!;
  const template = Object.keys(doc.paths).find((t) => templateMatches(t, pathOnly) && doc.paths[t]![method.toLowerCase()]);
  if (!template) return [`no documented operation for ${method} ${pathOnly}`];
  const op = doc.paths[template]![method.toLowerCase()]!;
  const response = op.responses?.[String(status)] ?? op.responses?.default;
  if (!response) return [`status ${status} is not documented for ${method} ${template}`];
  const schema = response.content?.["application/json"]?.schema;
  if (!schema) return [`no application/json schema for ${status} of ${method} ${template}`];
  const ajv = new (Ajv2020 as unknown as typeof Ajv2020.default)({ strict: false, allErrors: true });
  (addFormats as unknown as typeof addFormats.default)(ajv);
  const validate = ajv.compile(schema as object);
  return validate(body) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}
