/**
 * The embeddings request (`POST /api/v1/embeddings`, `EmbeddingsRequest`; OpenAI's shape), defined once:
 * validation with the service's messages and wire paths, and the OpenAPI body. The core routes a valid body
 * like a chat request's `model` (catalog, credentials, limits, generations; docs/dialects.md, "Embeddings").
 *
 * Decisions (docs/dialects.md):
 * - The top level is closed: a field Portico does not serve is refused naming it, never dropped.
 * - `input` is one text, a list of texts, one list of token ids or a list of them (OpenAI's four forms), at most
 *   2,048 entries; empty texts and empty lists are refused (OpenAI refuses them too).
 * - `encoding_format` is `float` (the default) or `base64` (little-endian float32, as OpenAI encodes it).
 */
import { array, bodyDefinition, byType, closedObject, integer, oneOf, string, z, type BodyDefinition } from "./kit.js";

/** The most inputs one request may embed (OpenAI's bound). */
export const MAX_EMBEDDING_INPUTS = 2048;

const text = () => string({ min: 1 });
const tokens = () => array(integer({ min: 0 }), { min: 1 });

const embeddingsRequest = closedObject(
  {
    model: string({ min: 1 }).meta({ description: "`<provider>/<model>` or a catalog slug of an embedding model, such as openai/text-embedding-3-small." }),
    input: byType(
      [text(), array(text(), { min: 1, max: MAX_EMBEDDING_INPUTS }), tokens(), array(tokens(), { min: 1, max: MAX_EMBEDDING_INPUTS })],
      "must be a string, an array of strings, an array of token ids or an array of arrays of token ids",
    ),
    dimensions: integer({ min: 1 }).meta({ description: "Size of each vector, where the model can shorten its vectors (OpenAI text-embedding-3, Gemini)." }),
    encoding_format: oneOf(["float", "base64"]).meta({ description: "`float` (default): arrays of numbers; `base64`: little-endian float32 bytes." }),
    user: string({ max: 256 }).meta({ description: "Your end user's id, passed to OpenAI-compatible endpoints." }),
  },
  { required: ["model", "input"] },
).meta({ description: "An OpenAI embeddings request. Unknown top-level fields are refused." });

export type EmbeddingsRequest = z.output<typeof embeddingsRequest>;

export const EmbeddingsRequest: BodyDefinition<typeof embeddingsRequest> = bodyDefinition(embeddingsRequest);
