/**
 * Isolation for the SQLite driver adapter. Prisma's better-sqlite3 adapter runs everything on one
 * connection; its transactions exclude each other, but a query made outside a transaction while one
 * is open runs *inside* it (and is lost if that transaction rolls back). The gate makes queries
 * outside a transaction wait until no transaction is open, and makes transactions wait their turn.
 */
export function createTransactionGate() {
  let busy = false;
  let tail: Promise<void> = Promise.resolve();
  let idle: Promise<void> = Promise.resolve();
  let markIdle: () => void = () => undefined;

  return {
    get busy() {
      return busy;
    },
    /** Resolves once the current transaction (if any) has ended. */
    whenIdle(): Promise<void> {
      return idle;
    },
    /** Waits for the previous transaction to end, then holds the gate until `release` is called. */
    async acquire(): Promise<() => void> {
      const previous = tail;
      let releaseTail!: () => void;
      tail = new Promise((r) => (releaseTail = r));
      await previous;
      busy = true;
      idle = new Promise((r) => (markIdle = r));
      let released = false;
      return () => {
        if (released) return;
        released = true;
        busy = false;
        markIdle();
        releaseTail();
      };
    },
  };
}

interface GateableTransaction {
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

interface GateableAdapter<T extends GateableTransaction> {
  queryRaw(...args: never[]): Promise<unknown>;
  executeRaw(...args: never[]): Promise<unknown>;
  executeScript(script: string): Promise<void>;
  startTransaction(...args: never[]): Promise<T>;
}

/** Takes the database's write lock without blocking (see src/db/client.ts). */
interface WriteLock {
  beginWhenFree(): Promise<void>;
  abandon(): void;
  write<T>(run: () => Promise<T>): Promise<T>;
}

/** Statements that write (the adapter's queries carry their SQL text as `sql`). */
const WRITE = /^\s*(?:INSERT|UPDATE|DELETE|REPLACE)\b/i;

/**
 * Makes an adapter's queries outside transactions wait for open transactions (mutates it in place).
 * With `lock`, a transaction that holds the gate first waits for the database's write lock, and so does
 * a writing statement outside a transaction (it then holds the gate as a transaction of its own).
 * `gate` is the one the adapter's transactions take; pass it to run work of your own in turn with them.
 */
export function gateSqliteAdapter<T extends GateableTransaction, A extends GateableAdapter<T>>(
  adapter: A,
  lock?: WriteLock,
  gate: ReturnType<typeof createTransactionGate> = createTransactionGate(),
): A {
  const outside = <F extends (...args: never[]) => Promise<unknown>>(fn: F): F =>
    (async (...args: Parameters<F>) => {
      const sql = (args[0] as { sql?: unknown } | undefined)?.sql;
      if (lock && typeof sql === "string" && WRITE.test(sql)) {
        const release = await gate.acquire();
        try {
          return await lock.write(() => fn(...args));
        } finally {
          release();
        }
      }
      // Check and run in one synchronous step: better-sqlite3 executes the statement before yielding.
      while (gate.busy) await gate.whenIdle();
      return fn(...args);
    }) as F;
  const target = adapter as A & Record<string, unknown>;
  target.queryRaw = outside(adapter.queryRaw.bind(adapter)) as A["queryRaw"];
  target.executeRaw = outside(adapter.executeRaw.bind(adapter)) as A["executeRaw"];
  target.executeScript = outside(adapter.executeScript.bind(adapter));
  const startTransaction = adapter.startTransaction.bind(adapter);
  target.startTransaction = (async (...args: Parameters<A["startTransaction"]>) => {
    const release = await gate.acquire();
    try {
      await lock?.beginWhenFree();
      const tx = await startTransaction(...args);
      const commit = tx.commit.bind(tx);
      const rollback = tx.rollback.bind(tx);
      tx.commit = async () => {
        try {
          return await commit();
        } finally {
          release();
        }
      };
      tx.rollback = async () => {
        try {
          return await rollback();
        } finally {
          release();
        }
      };
      return tx;
    } catch (err) {
      lock?.abandon();
      release();
      throw err;
    }
  }) as A["startTransaction"];
  return adapter;
}
