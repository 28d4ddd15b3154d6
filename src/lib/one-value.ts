/**
 * A server-streaming call's request: an async iterable of one value. Cheaper than connect's
 * `createAsyncIterable([value])` (an async generator: its object, and promise jobs for each `next()`), and a
 * transport of this process takes the value without reading the iterable at all (src/core/direct-transport.ts).
 */
export class OneValue<T> implements AsyncIterable<T> {
  constructor(readonly value: T) {}

  [Symbol.asyncIterator](): AsyncIterator<T> {
    const value = this.value;
    let done = false;
    return {
      next: () => {
        if (done) return Promise.resolve({ done: true, value: undefined } as IteratorResult<T>);
        done = true;
        return Promise.resolve({ done: false, value });
      },
      return: () => {
        done = true;
        return Promise.resolve({ done: true, value: undefined } as IteratorResult<T>);
      },
    };
  }
}

export function oneValue<T>(value: T): AsyncIterable<T> {
  return new OneValue(value);
}
