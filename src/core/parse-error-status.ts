/**
 * A request message that is not valid protobuf is the caller's fault: INVALID_ARGUMENT, not INTERNAL.
 *
 * connect-es reports a binary decoding failure as `Code.Internal` ("parse binary: …") before any
 * interceptor runs, so the status is corrected where it is written: in the gRPC status header or
 * trailer of the response. (JSON decoding failures are already INVALID_ARGUMENT.)
 */
import type { OutgoingHttpHeaders } from "node:http";

const GRPC_INTERNAL = "13";
const GRPC_INVALID_ARGUMENT = "3";

function correct(headers: OutgoingHttpHeaders | undefined): void {
  if (!headers || String(headers["grpc-status"]) !== GRPC_INTERNAL) return;
  const message = decodeURIComponent(String(headers["grpc-message"] ?? ""));
  if (message.startsWith("parse binary:")) headers["grpc-status"] = GRPC_INVALID_ARGUMENT;
}

interface StatusWritingResponse {
  writeHead: (...args: never[]) => unknown;
  addTrailers: (headers: OutgoingHttpHeaders) => void;
}

/** Wraps a response so that a protobuf parse failure goes out as INVALID_ARGUMENT. */
export function correctParseErrorStatus(res: StatusWritingResponse): void {
  const addTrailers = res.addTrailers.bind(res);
  res.addTrailers = (headers) => {
    correct(headers);
    addTrailers(headers);
  };
  const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => unknown;
  res.writeHead = ((...args: unknown[]) => {
    const headers = args.find((a, i) => i > 0 && typeof a === "object" && a !== null) as OutgoingHttpHeaders | undefined;
    correct(headers);
    return writeHead(...args);
  }) as never;
}
