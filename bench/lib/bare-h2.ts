/**
 * The bare gRPC-shaped exchange of the hop benches (hop-floor.ts, split-hop.ts --bare, hop-frames.ts): node:http2 with
 * no Portico code, unary, one message each way, as Portico's core answers (HEADERS, DATA, trailers).
 */
import http2 from "node:http2";

/** A gRPC message frame (uncompressed flag, big-endian length) of `n` bytes of payload ("a"s). */
export function grpcFrame(n: number): Buffer {
  const b = Buffer.alloc(5 + n, 0x61);
  b[0] = 0;
  b.writeUInt32BE(n, 1);
  return b;
}

/** A node:http2 server answering every stream, once its body ended, with `answer` and OK trailers (not yet listening). */
export function bareGrpcServer(answer: Buffer): http2.Http2Server {
  const server = http2.createServer();
  server.on("stream", (stream) => {
    stream.on("data", () => undefined);
    stream.on("end", () => {
      stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(answer);
    });
  });
  return server;
}
