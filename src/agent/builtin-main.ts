/**
 * Subprocess entry of the built-in agent: ACP over stdio. Run compiled:
 * `node dist/agent/builtin-main.js` (`npm run build` writes it).
 */
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { createBuiltinAgent } from "./builtin-agent.js";

const conn = createBuiltinAgent().connect(
  acp.ndJsonStream(Writable.toWeb(process.stdout) as WritableStream<Uint8Array>, Readable.toWeb(process.stdin) as unknown as ReadableStream<Uint8Array>),
);
await conn.closed;
process.exit(0);
