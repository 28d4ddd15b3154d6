/**
 * The read-ahead queue of a server-streaming gRPC call, shared by the split gateway's own client
 * (src/gateway/h2-grpc-transport.ts) and the @grpc/grpc-js reference client (test/helpers/grpc-js-transport.ts).
 * Each client keeps what is its own (framing, status, trailers, abort wiring); this class holds what the reader
 * sees:
 * - messages the call delivers (`push`) wait in a queue of at most READ_AHEAD while the reader has not asked for
 *   them; a `next()` waiting for one gets it directly;
 * - the call's outcome (`finish`: null on success, else the error) comes after every queued message;
 * - `opening(start)` resolves when the call is answered (`opened()`) or ends, rejects when it ends with an error;
 * - `return()` cancels a call still open (the `cancel` callback) and drops the queue; a second `next()` while one
 *   waits is refused.
 * Flow control, through the `more` callback ("the reader wants more"): a source that delivers until paused (an
 * HTTP/2 stream: give `pause`) is paused when READ_AHEAD messages wait and resumed (`more`) when the reader takes
 * one; a source that delivers one message per request (grpc-js's `startRead()`: no `pause`) is asked for the next
 * after each message while fewer than READ_AHEAD wait, and after `pull()` to start.
 * No promise turn of its own: `next()` answers a queued message with one resolved promise, as before the clients
 * shared it.
 */
import { Code, ConnectError } from "@connectrpc/connect";

/** Messages a stream reads ahead of its reader (the Readable of grpc-js's own stream client holds 16). */
export const READ_AHEAD = 16;

export interface ReadAheadSource {
  /** The reader wants more: resume a paused source, or ask a one-at-a-time source for its next message. */
  more(): void;
  /** READ_AHEAD messages wait: stop delivering until `more()`. Without it, each `more()` asks for one message. */
  pause?(): void;
  /** The reader stopped (`return()`) while the call is open: cancel the call. */
  cancel(): void;
  /** The outcome is set (once): the client drops what it listens to (the caller's abort signal). */
  ended?(): void;
}

interface Waiter<T> {
  resolve(r: IteratorResult<T>): void;
  reject(e: unknown): void;
}

export class ReadAhead<T> implements AsyncIterator<T>, AsyncIterable<T> {
  readonly #queue: T[] = [];
  /** The end the reader sees after the queue: undefined while open, null on success, else the error. */
  #end: ConnectError | null | undefined;
  #waiter: Waiter<T> | undefined;
  #opening: { resolve(): void; reject(e: unknown): void } | undefined;
  /** A pausing source is flowing / a one-at-a-time source has been asked for a message. */
  #wanting: boolean;
  readonly #source: ReadAheadSource;
  /** The source delivers until paused (it has `pause`), rather than one message per `more()`. */
  readonly #pausing: boolean;

  constructor(source: ReadAheadSource) {
    this.#source = source;
    this.#pausing = source.pause !== undefined;
    // An HTTP/2 stream flows from the start; a one-at-a-time source reads nothing until asked.
    this.#wanting = this.#pausing;
  }

  /** True once the outcome is set: messages delivered after it are dropped (the clients skip decoding them). */
  get done(): boolean {
    return this.#end !== undefined;
  }

  /** Runs `start` (which starts the call); resolves when the call is answered (`opened()`) or ends, rejects when it ends with an error. */
  opening(start: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#opening = { resolve, reject };
      start();
    });
  }

  /** The call was answered (its response headers). */
  opened(): void {
    const o = this.#opening;
    if (o !== undefined) {
      this.#opening = undefined;
      o.resolve();
    }
  }

  /** Asks the source for more when the reader has room and nothing is asked for yet (a one-at-a-time source's first read). */
  pull(): void {
    if (!this.#wanting && this.#end === undefined && this.#queue.length < READ_AHEAD) {
      this.#wanting = true;
      this.#source.more();
    }
  }

  /** A message of the call, to the waiting `next()` or the queue. */
  push(message: T): void {
    if (this.#end !== undefined) return;
    const pausing = this.#pausing;
    // A one-at-a-time source has answered its request.
    if (!pausing) this.#wanting = false;
    const w = this.#waiter;
    if (w !== undefined) {
      this.#waiter = undefined;
      w.resolve({ done: false, value: message });
    } else {
      this.#queue.push(message);
      if (this.#wanting && this.#queue.length >= READ_AHEAD) {
        this.#wanting = false;
        this.#source.pause!();
      }
    }
    if (!pausing) this.pull();
  }

  /** The call's outcome (the first one counts): null on success, else the error the reader gets after the queue. */
  finish(outcome: ConnectError | null): void {
    if (this.#end !== undefined) return;
    this.#end = outcome;
    this.#source.ended?.();
    const o = this.#opening;
    if (o !== undefined) {
      this.#opening = undefined;
      if (outcome) o.reject(outcome);
      else o.resolve();
    }
    const w = this.#waiter;
    if (w !== undefined && this.#queue.length === 0) {
      this.#waiter = undefined;
      if (outcome) w.reject(outcome);
      else w.resolve({ done: true, value: undefined });
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#queue.length > 0) {
      const value = this.#queue.shift()!;
      this.pull();
      return Promise.resolve({ done: false, value });
    }
    const end = this.#end;
    if (end === null) return Promise.resolve({ done: true, value: undefined });
    if (end) return Promise.reject(end);
    if (this.#waiter) return Promise.reject(new ConnectError("concurrent next() on a stream", Code.Internal));
    this.pull();
    return new Promise((resolve, reject) => (this.#waiter = { resolve, reject }));
  }

  return(): Promise<IteratorResult<T>> {
    if (this.#end === undefined) {
      this.#source.cancel();
      this.finish(null);
    }
    this.#queue.length = 0;
    return Promise.resolve({ done: true, value: undefined });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return this;
  }
}
