/**
 * The moment a SQLite client waits for another connection's write lock, as an event: src/db/client.ts takes the
 * lock with BEGIN IMMEDIATE (no busy timeout) and tries again on a timer while SQLite refuses it with SQLITE_BUSY.
 * `watchBusyBegins` counts those refusals on every better-sqlite3 connection of this process until `restore()`.
 */
import Database from "better-sqlite3";

export interface BusyBegins {
  /** Refusals so far. */
  readonly count: number;
  restore(): void;
}

export function watchBusyBegins(onRefused?: (count: number) => void): BusyBegins {
  const probe = new Database(":memory:");
  const proto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as { run: (...args: unknown[]) => unknown };
  probe.close();
  const run = proto.run;
  let count = 0;
  proto.run = function (this: { source: string }, ...args: unknown[]) {
    try {
      return run.apply(this, args);
    } catch (err) {
      if (this.source === "BEGIN IMMEDIATE" && String((err as { code?: unknown }).code).startsWith("SQLITE_BUSY")) {
        count++;
        onRefused?.(count);
      }
      throw err;
    }
  };
  return {
    get count() {
      return count;
    },
    restore: () => void (proto.run = run),
  };
}
