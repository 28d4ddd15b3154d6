/**
 * gRPC message frames (a flag byte, a big-endian uint32 length, the message) read off an HTTP/2 stream's chunks: used
 * by the split gateway's client for each call's answer (src/gateway/h2-grpc-transport.ts) and by both ends of the hop
 * channel (src/gateway/hop-channel.ts, src/core/grpc-fast-path.ts).
 */
/**
 * gRPC message frames read off a stream's chunks, a frame and its 5-byte prefix across any number of them. The
 * chunks of a frame not yet whole are kept in a list and joined once when it is (a frame of many DATA frames costs
 * one copy, not one per chunk). The sink gets each whole frame's flag byte and message, in order.
 */
/** What takes the frames read: each whole frame's flag byte and message, in order. */
export interface FrameSink {
  onFrame(flags: number, message: Buffer): void;
}

export class FrameReader {
  #rest: Buffer[] | undefined;
  #restLen = 0;

  constructor(
    /** Largest message accepted: a longer frame's length makes `push` throw (the stream is not one to read on). */
    readonly maxBytes: number,
    /** An object, not a closure: a reader is made per call (a closure per call cost more). */
    readonly sink: FrameSink,
  ) {}

  push(chunk: Buffer): void {
    let buf = chunk;
    if (this.#rest) {
      this.#rest.push(chunk);
      this.#restLen += chunk.length;
      if (this.#restLen < 5) return;
      if (this.#rest[0]!.length < 5) this.#rest = [Buffer.concat(this.#rest, this.#restLen)];
      const len = this.#rest[0]!.readUInt32BE(1);
      if (len > this.maxBytes) throw new FrameTooLarge(len, this.maxBytes);
      if (this.#restLen < 5 + len) return;
      buf = this.#rest.length === 1 ? this.#rest[0]! : Buffer.concat(this.#rest, this.#restLen);
      this.#rest = undefined;
      this.#restLen = 0;
    }
    let off = 0;
    while (buf.length - off >= 5) {
      const len = buf.readUInt32BE(off + 1);
      if (len > this.maxBytes) throw new FrameTooLarge(len, this.maxBytes);
      if (buf.length - off - 5 < len) break;
      const flags = buf[off]!;
      const message = buf.subarray(off + 5, off + 5 + len);
      off += 5 + len;
      this.sink.onFrame(flags, message);
    }
    if (off < buf.length) {
      this.#rest = [off === 0 ? buf : buf.subarray(off)];
      this.#restLen = buf.length - off;
    }
  }
}

/** A frame longer than the reader's limit. */
export class FrameTooLarge extends Error {
  constructor(
    readonly length: number,
    readonly maxBytes: number,
  ) {
    super(`message size ${length} is larger than the limit ${maxBytes}`);
  }
}
