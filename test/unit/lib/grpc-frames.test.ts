/**
 * src/lib/grpc-frames.ts: gRPC message frames read off chunks cut anywhere (inside the 5-byte prefix too), whole,
 * in order, with their flag byte; a length over the limit throws FrameTooLarge, however the prefix arrives.
 */
import { describe, expect, it } from "vitest";
import { FrameReader, FrameTooLarge } from "../../../src/lib/grpc-frames.js";
import { mulberry32 } from "../../helpers/prng.js";

function frame(flags: number, body: Buffer): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flags;
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

/** `bytes` cut into chunks at the given offsets. */
function cut(bytes: Buffer, at: number[]): Buffer[] {
  const points = [0, ...at.filter((x) => x > 0 && x < bytes.length).sort((a, b) => a - b), bytes.length];
  const out: Buffer[] = [];
  for (let i = 1; i < points.length; i++) if (points[i]! > points[i - 1]!) out.push(bytes.subarray(points[i - 1], points[i]));
  return out;
}

describe("FrameReader", () => {
  it("reads every frame whole and in order, however the stream is cut (2,000 generated streams)", () => {
    const rand = mulberry32(24);
    for (let n = 0; n < 2000; n++) {
      const frames = Array.from({ length: 1 + Math.floor(rand() * 6) }, () => {
        const size = rand() < 0.1 ? 0 : rand() < 0.8 ? Math.floor(rand() * 40) : Math.floor(rand() * 70_000);
        const body = Buffer.alloc(size);
        for (let i = 0; i < size; i += 997) body[i] = Math.floor(rand() * 256);
        return { flags: rand() < 0.2 ? 1 : 0, body };
      });
      const stream = Buffer.concat(frames.map((f) => frame(f.flags, f.body)));
      const at = Array.from({ length: Math.floor(rand() * 12) }, () => Math.floor(rand() * stream.length));
      // Now and then every byte on its own (small streams only).
      const chunks = stream.length < 200 && rand() < 0.2 ? cut(stream, Array.from({ length: stream.length }, (_, i) => i)) : cut(stream, at);
      const got: Array<{ flags: number; body: Buffer }> = [];
      const reader = new FrameReader(1 << 20, { onFrame: (flags, message) => got.push({ flags, body: Buffer.from(message) }) });
      for (const c of chunks) reader.push(c);
      expect(got.length, `stream ${n}`).toBe(frames.length);
      got.forEach((g, i) => {
        expect(g.flags).toBe(frames[i]!.flags);
        expect(g.body.equals(frames[i]!.body)).toBe(true);
      });
    }
  });

  it("a frame longer than the limit throws FrameTooLarge, whether its prefix comes whole or in pieces", () => {
    const big = frame(0, Buffer.alloc(101));
    for (const pieces of [[big], cut(big, [2]), cut(big, [1, 3, 4]), cut(big, [5])]) {
      const reader = new FrameReader(100, { onFrame: () => expect.unreachable("no frame over the limit") });
      let thrown: unknown;
      try {
        for (const p of pieces) reader.push(p);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(FrameTooLarge);
      expect(thrown).toMatchObject({ length: 101, maxBytes: 100 });
    }
    // At the limit: read.
    const got: number[] = [];
    new FrameReader(100, { onFrame: (_f, m) => got.push(m.length) }).push(frame(0, Buffer.alloc(100)));
    expect(got).toEqual([100]);
  });
});
