/**
 * A PostgreSQL cluster and a redis-server of a test's own, on free loopback ports, that the test may stop
 * and start at will (the machine's shared PostgreSQL on 5432 and Redis on 6379 serve other test files at
 * the same time and are never touched).
 *
 * PostgreSQL: `initdb` in a temporary folder with the server binaries of /usr/lib/postgresql/<newest>/bin
 * (or `pg_config --bindir`), started and stopped with `pg_ctl -w`. initdb and postgres refuse to run as
 * root, so as root (CI, these machines) every command runs as the `postgres` user through `runuser`, in a
 * folder that user owns; as any other user they run as that user.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

function postgresBinDir(): string {
  const root = "/usr/lib/postgresql";
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, "bin", "initdb")))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(root, versions[0], "bin");
  }
  return execFileSync("pg_config", ["--bindir"], { encoding: "utf8" }).trim();
}

export interface PrivatePostgres {
  /** postgresql://postgres@127.0.0.1:<port>/postgres (trust auth). */
  url: string;
  port: number;
  /** `pg_ctl stop`: "fast" ends every session and shuts down cleanly; "immediate" is a crash. */
  stop(mode?: "fast" | "immediate"): Promise<void>;
  /** `pg_ctl start -w`: resolves once the server accepts connections. */
  start(): Promise<void>;
  /** Stops the server (if running) and removes its folder. */
  dispose(): Promise<void>;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "portico-private-pg-"));
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    chownSync(dir, uid, gid);
  }
  const run = (cmd: string, args: string[]) =>
    new Promise<void>((resolve, reject) => {
      const [file, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", join(bin, cmd), ...args]] : [join(bin, cmd), args];
      execFile(file, argv, { cwd: dir, timeout: 60_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`${cmd} ${args.join(" ")} failed: ${err.message}\n${stdout}${stderr}`)) : resolve(),
      );
    });
  const data = join(dir, "data");
  const port = await freePort();
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c max_connections=100`;
  let running = false;
  try {
    await run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const pg: PrivatePostgres = {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    port,
    async start() {
      await run("pg_ctl", ["-D", data, "-l", join(dir, "server.log"), "-o", options, "-w", "-t", "60", "start"]);
      running = true;
    },
    async stop(mode = "fast") {
      await run("pg_ctl", ["-D", data, "-m", mode, "-w", "-t", "60", "stop"]);
      running = false;
    },
    async dispose() {
      if (running) await pg.stop("immediate").catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await pg.start();
  } catch (err) {
    await pg.dispose();
    throw err;
  }
  return pg;
}

export interface PrivateRedis {
  url: string;
  port: number;
  /** SIGKILL (an outage, not a shutdown); resolves once the process is gone. */
  stop(): Promise<void>;
  /** Starts a new empty server on the same port; resolves once it accepts connections. */
  start(): Promise<void>;
  dispose(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const alive = () => child !== undefined && child.exitCode === null && child.signalCode === null;
  const redis: PrivateRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    start: () =>
      new Promise<void>((resolve, reject) => {
        const c = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
          stdio: ["ignore", "pipe", "ignore"],
        });
        child = c;
        let out = "";
        const onData = (d: Buffer) => {
          out += d;
          if (out.includes("Ready to accept connections")) {
            c.stdout!.off("data", onData);
            c.stdout!.resume();
            resolve();
          }
        };
        c.stdout!.on("data", onData);
        c.once("exit", (code) => reject(new Error(`redis-server exited ${code}: ${out}`)));
      }),
    async stop() {
      if (!alive()) return;
      const gone = new Promise((r) => child!.once("exit", r));
      child!.kill("SIGKILL");
      await gone;
    },
    dispose: () => redis.stop(),
  };
  await redis.start();
  return redis;
}
