/**
 * The Gemini `generateContent` request (`POST /api/v1beta/models/{model}:generateContent` and
 * `:streamGenerateContent`, `GenerateContentRequest`) and the `:countTokens` request (`GeminiCountTokensRequest`),
 * defined once: validation with the service's messages and wire paths, and the OpenAPI body. The dialect
 * (src/core/chat/dialects/gemini-generate.ts) decodes a valid body into the canonical request; the model comes
 * from the path. The routing fields Portico shares with chat completions (`models`, `provider`, `plugins`,
 * `session_id`, `trace`, `user`, `service_tier`, `cache`) are passed on under the same names and checked by the
 * ChatRequest definition.
 *
 * Decisions (docs/dialects.md, "Gemini"):
 * - Every object is closed: a field of Google's API that Portico does not serve (`safetySettings`,
 *   `cachedContent`, `labels`, `generationConfig.responseModalities`, `tools[i].googleSearch`,
 *   `parts[j].executableCode`, …) is refused naming it, never dropped. Names are the JSON (lowerCamelCase) ones the
 *   official SDKs send; the snake_case spellings protobuf JSON also allows are refused the same way.
 * - A part holds exactly one of `text`, `inlineData`, `fileData`, `functionCall`, `functionResponse`; `thought`
 *   and `thoughtSignature` may go with it.
 * - `stopSequences` holds at most 4 entries (the canonical request's bound; Google allows 5); `candidateCount`
 *   is 1 (one candidate, as every other dialect answers).
 */
import { anything, array, bodyDefinition, boolean, closedObject, integer, number, object, oneOf, string, z, type BodyDefinition } from "./kit.js";

const str = () => string();

const DATA_FIELDS = ["text", "inlineData", "fileData", "functionCall", "functionResponse"] as const;

const part = closedObject({
  text: str(),
  thought: boolean(),
  thoughtSignature: str(),
  inlineData: closedObject({ mimeType: string({ min: 1 }), data: string({ min: 1 }) }, { required: ["mimeType", "data"] }),
  fileData: closedObject({ mimeType: str(), fileUri: string({ min: 1 }) }, { required: ["fileUri"] }),
  functionCall: closedObject({ id: str(), name: string({ min: 1 }), args: object({}) }, { required: ["name"] }),
  functionResponse: closedObject({ id: str(), name: string({ min: 1 }), response: object({}) }, { required: ["name", "response"] }),
}).check(
  z.superRefine((p, ctx) => {
    const present = DATA_FIELDS.filter((k) => p[k] !== undefined);
    if (present.length !== 1) {
      ctx.addIssue({
        code: "custom",
        input: p,
        message: present.length === 0 ? `must hold one of ${DATA_FIELDS.join(", ")}` : `must hold only one of ${DATA_FIELDS.join(", ")}, got ${present.join(" and ")}`,
      });
    }
  }),
);

const content = closedObject({ role: oneOf(["user", "model", "function"]), parts: array(part, { min: 1 }) }, { required: ["parts"] });

const systemInstruction = closedObject({ role: str(), parts: array(closedObject({ text: str() }, { required: ["text"] }), { min: 1 }) }, { required: ["parts"] });

const TOOL_NAME = /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$/;
const functionDeclaration = closedObject(
  {
    name: string({ pattern: TOOL_NAME, patternText: "must start with a letter or _ and be at most 128 characters of a-z, A-Z, 0-9, _, ., : and -" }),
    description: str(),
    parameters: object({}),
    parametersJsonSchema: object({}),
  },
  { required: ["name"] },
);
// Not required, so another kind of tool (`googleSearch`, `codeExecution`, …) is refused by its own name.
const tool = closedObject({ functionDeclarations: array(functionDeclaration, { min: 1 }) });

const toolConfig = closedObject({
  functionCallingConfig: closedObject({ mode: oneOf(["MODE_UNSPECIFIED", "AUTO", "ANY", "NONE"]), allowedFunctionNames: array(string({ min: 1 }), { min: 1 }) }),
});

const thinkingConfig = closedObject({
  thinkingBudget: integer({ min: -1 }),
  includeThoughts: boolean(),
  thinkingLevel: oneOf(["MINIMAL", "LOW", "MEDIUM", "HIGH", "minimal", "low", "medium", "high"]),
});

const generationConfig = closedObject({
  maxOutputTokens: integer({ min: 1 }),
  temperature: number({ min: 0, max: 2 }),
  topP: number({ min: 0, max: 1 }),
  topK: integer({ min: 0 }),
  stopSequences: array(str(), { max: 4 }),
  candidateCount: integer({ min: 1, max: 1 }),
  responseMimeType: oneOf(["text/plain", "application/json"]),
  responseSchema: object({}),
  responseJsonSchema: object({}),
  thinkingConfig,
  presencePenalty: number({ min: -2, max: 2 }),
  frequencyPenalty: number({ min: -2, max: 2 }),
  seed: integer(),
});

/** The prompt and settings fields both operations share (countTokens' `generateContentRequest` has these). */
const promptFields = () => ({
  contents: array(content, { min: 1 }),
  systemInstruction,
  tools: array(tool),
  toolConfig,
  generationConfig,
});

/** Routing fields shared with chat completions (checked by the ChatRequest definition under the same names). */
const routingFields = () => ({
  models: anything(),
  provider: anything(),
  plugins: anything(),
  session_id: anything(),
  trace: anything(),
  user: anything(),
  service_tier: anything(),
});

const generateContentRequest = closedObject(
  {
    // The path names the model; a body `model` must name the same one (as `models/<id>` or `<id>`).
    model: str(),
    ...promptFields(),
    ...routingFields(),
    // Portico's response cache (docs/operations.md), checked by the ChatRequest definition under the same name.
    cache: anything(),
  },
  { required: ["contents"] },
).meta({ description: "A Gemini GenerateContentRequest (the model is in the path). Unknown fields are refused." });

const countTokensRequest = closedObject({
  contents: array(content, { min: 1 }),
  generateContentRequest: closedObject({ model: str(), ...promptFields() }, { required: ["contents"] }),
  ...routingFields(),
}).check(
  z.superRefine((b, ctx) => {
    if ((b.contents === undefined) === (b.generateContentRequest === undefined)) {
      ctx.addIssue({ code: "custom", input: b, message: "must hold one of contents and generateContentRequest" });
    }
  }),
).meta({ description: "A Gemini CountTokensRequest: `contents`, or a whole `generateContentRequest`." });

export type GenerateContentRequest = z.output<typeof generateContentRequest>;
export type GeminiCountTokensRequest = z.output<typeof countTokensRequest>;
export type GeminiContent = z.output<typeof content>;
export type GeminiPart = z.output<typeof part>;

export const GenerateContentRequest: BodyDefinition<typeof generateContentRequest> = bodyDefinition(generateContentRequest);

export const GeminiCountTokensRequest: BodyDefinition<typeof countTokensRequest> = bodyDefinition(countTokensRequest);
