/**
 * An AbortController for the request path whose signal V8 can collect young.
 *
 * Node 20 makes every `AbortSignal` by creating an `EventTarget`, changing its prototype to
 * `AbortSignal.prototype` and then adding fields to it; V8 gives an object shaped that way a survival it does not
 * earn: every such signal outlives its scavenges and is promoted to the old generation, and with it whatever it
 * references (its listeners, the closures' contexts, the request objects they hold). At c=32 the two to three
 * signals of a chat request and what hangs from them were about 60 % of what the serving process promoted
 * (bench/README.md, "Resident memory under load: what was promoted, and why"): the old generation grew by
 * ~2.5 KB a request and V8 let it grow to 2–4 × its live size between mark-compacts.
 *
 * `LightAbortController` has the same surface (`signal`, `abort(reason?)`); its signal is an instance of a class
 * that extends `EventTarget` (constructed, its prototype never changed) and inherits from `AbortSignal.prototype`,
 * so `instanceof AbortSignal` holds, `aborted` / `reason` / `throwIfAborted()` / `onabort` / listeners behave as
 * Node's, and Node's APIs that take a signal accept it. `abort()` dispatches one `abort` event, once, with the
 * reason (a `DOMException` named `AbortError` by default), as Node's does.
 *
 * `AbortSignal.any([...])` keeps its dependants on the source signal under an internal symbol and aborts them
 * from inside Node's own abort; for a light signal given to `AbortSignal.any`, those dependants are kept on a real
 * AbortController made for that purpose (on first use) and aborted with it. Where that internal symbol cannot be
 * found (a Node version that changed it), `LightAbortController` is Node's `AbortController` itself.
 */

/** Node's internal key of a signal's dependants (set by `AbortSignal.any`), found by its description. */
function findDependantsKey(): symbol | undefined {
  try {
    const source = new AbortController();
    AbortSignal.any([source.signal]);
    return Object.getOwnPropertySymbols(source.signal).find((s) => s.description === "kDependantSignals");
  } catch {
    return undefined;
  }
}

const dependantsKey = findDependantsKey();

const ABORTED = Symbol("aborted");
const REASON = Symbol("reason");
const SHADOW = Symbol("shadow");

class LightAbortSignal extends EventTarget {
  [ABORTED] = false;
  [REASON]: unknown = undefined;
  /** A real controller holding `AbortSignal.any`'s dependants of this signal (made on first use). */
  [SHADOW]: AbortController | undefined = undefined;

  get aborted(): boolean {
    return this[ABORTED];
  }

  get reason(): unknown {
    return this[REASON];
  }

  throwIfAborted(): void {
    if (this[ABORTED]) throw this[REASON];
  }
}
Object.setPrototypeOf(LightAbortSignal.prototype, AbortSignal.prototype);
if (dependantsKey) {
  Object.defineProperty(LightAbortSignal.prototype, dependantsKey, {
    get(this: LightAbortSignal) {
      return this[SHADOW] ? (this[SHADOW].signal as unknown as Record<symbol, unknown>)[dependantsKey] : undefined;
    },
    set(this: LightAbortSignal, value: unknown) {
      this[SHADOW] ??= new AbortController();
      (this[SHADOW].signal as unknown as Record<symbol, unknown>)[dependantsKey] = value;
    },
  });
}

class LightController {
  readonly signal: AbortSignal;

  constructor() {
    this.signal = new LightAbortSignal() as unknown as AbortSignal;
  }

  abort(reason?: unknown): void {
    const s = this.signal as unknown as LightAbortSignal;
    if (s[ABORTED]) return;
    s[ABORTED] = true;
    s[REASON] = reason === undefined ? new DOMException("This operation was aborted", "AbortError") : reason;
    s.dispatchEvent(new Event("abort"));
    // The signals AbortSignal.any made of this one: Node aborts them when the controller holding them aborts.
    s[SHADOW]?.abort(s[REASON]);
  }
}

/** Node's AbortController surface, with a signal that does not outlive its scavenges (see above). */
export const LightAbortController: { new (): AbortController } = dependantsKey
  ? (LightController as unknown as { new (): AbortController })
  : AbortController;
