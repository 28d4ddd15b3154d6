/**
 * The BYOK master keyring: named 256-bit key versions, one of them primary. Sealing is AES-256-GCM
 * with a fresh random 96-bit nonce per encryption and caller-supplied associated data; each sealed
 * blob is `version byte ‖ nonce (12) ‖ tag (16) ‖ ciphertext`, and the caller stores the key id
 * beside it. The version byte is also part of the associated data, so a blob cannot be replayed
 * under another format.
 *
 * Sources, in order: PORTICO_MASTER_KEY (raw key or keyring JSON), PORTICO_MASTER_KEY_FILE, or
 * (outside production) `<dataDir>/master.key`, created with mode 0600 on first run. A keyring read
 * from a file is re-read when the file changes, so `portico admin byok rotate-keys` can introduce a
 * new primary while servers keep running. Key material never appears in errors, logs or JSON.
 */
import { ensureDir } from "../../lib/dirs.js";
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  randomBytes,
  timingSafeEqual,
} from "node:crypto";
import {
  chmodSync,
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { inspect } from "node:util";

/** Format version of sealed blobs (first byte, and bound into the associated data). */
export const SEAL_FORMAT_VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
export const MASTER_KEY_BYTES = 32;
const HEADER_BYTES = 1 + NONCE_BYTES + TAG_BYTES;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
const CHECK_CONTEXT = "portico.byok.keyring.check.v1";
const ID_CONTEXT = "portico.byok.keyring.id.v1";
export const DEFAULT_KEY_FILE_NAME = "master.key";

/** A keyring that cannot be used: missing, malformed, wrong size, unsafe permissions, wrong check value. */
export class KeyringError extends Error {
  override name = "KeyringError";
}

/** Why a sealed blob could not be opened. */
export type OpenFailure = "unknown_key" | "malformed" | "authentication_failed";

export class SealOpenError extends Error {
  override name = "SealOpenError";
  constructor(readonly failure: OpenFailure) {
    super(`sealed value could not be opened (${failure})`);
  }
}

export interface KeyringState {
  primaryId: string;
  /** Key id → 32 bytes of key material. */
  keys: Map<string, Buffer>;
}

export type KeyringSource =
  | { kind: "env" }
  | { kind: "file"; path: string; /** Whether this process created the file (first run). */ created: boolean };

export interface KeyringOptions {
  /** Minimum time between checks of a key file for changes (ms). Default 1000. */
  refreshIntervalMs?: number;
  /** Called with a message (never key material) when a reload is refused. */
  onWarning?: (message: string) => void;
}

export class Keyring {
  #state: KeyringState;
  readonly source: KeyringSource;
  readonly #refreshIntervalMs: number;
  readonly #onWarning: (message: string) => void;
  #lastCheck = 0;
  #stamp: string | undefined;

  constructor(state: KeyringState, source: KeyringSource = { kind: "env" }, opts: KeyringOptions = {}) {
    validateState(state, "keyring");
    this.#state = cloneState(state);
    this.source = source;
    this.#refreshIntervalMs = opts.refreshIntervalMs ?? 1000;
    this.#onWarning = opts.onWarning ?? (() => undefined);
    if (source.kind === "file") {
      this.#stamp = fileStamp(source.path);
      this.#lastCheck = Date.now();
    }
  }

  /** The key id new seals use (after picking up a changed key file). */
  get primaryId(): string {
    this.refresh();
    return this.#state.primaryId;
  }

  keyIds(): string[] {
    return [...this.#state.keys.keys()];
  }

  has(keyId: string): boolean {
    return this.#state.keys.has(keyId);
  }

  /** HMAC of a constant under the key: stored in the database so a wrong master key is refused. */
  checkValue(keyId: string): string {
    const key = this.#state.keys.get(keyId);
    if (!key) throw new KeyringError(`keyring has no key "${keyId}"`);
    return checkValueOf(key);
  }

  /** Encrypts under the primary key with a fresh random nonce. */
  seal(plaintext: Uint8Array, aad: Uint8Array): { keyId: string; blob: Buffer } {
    const keyId = this.primaryId;
    const key = this.#state.keys.get(keyId)!;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(fullAad(aad));
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    const blob = Buffer.concat([Buffer.of(SEAL_FORMAT_VERSION), nonce, cipher.getAuthTag(), body]);
    return { keyId, blob };
  }

  /** Decrypts a blob sealed under `keyId` with the same associated data; throws {@link SealOpenError}. */
  open(keyId: string, blob: Uint8Array, aad: Uint8Array): Buffer {
    let key = this.#state.keys.get(keyId);
    if (!key) {
      this.refresh(true);
      key = this.#state.keys.get(keyId);
    }
    if (!key) throw new SealOpenError("unknown_key");
    const buf = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
    if (buf.length < HEADER_BYTES || buf[0] !== SEAL_FORMAT_VERSION) throw new SealOpenError("malformed");
    const nonce = buf.subarray(1, 1 + NONCE_BYTES);
    const tag = buf.subarray(1 + NONCE_BYTES, HEADER_BYTES);
    try {
      const decipher = createDecipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES });
      decipher.setAAD(fullAad(aad));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(buf.subarray(HEADER_BYTES)), decipher.final()]);
    } catch {
      throw new SealOpenError("authentication_failed");
    }
  }

  /**
   * Re-reads a key file that changed since the last look (at most once per refresh interval unless
   * forced). A reload that would change the material of an existing key id is refused.
   */
  refresh(force = false): void {
    if (this.source.kind !== "file") return;
    const now = Date.now();
    if (!force && now - this.#lastCheck < this.#refreshIntervalMs) return;
    this.#lastCheck = now;
    const path = this.source.path;
    const stamp = fileStamp(path);
    if (stamp === undefined || stamp === this.#stamp) return;
    let next: KeyringState;
    try {
      next = parseKeyringText(readFileSync(path, "utf8"), path);
    } catch (err) {
      this.#onWarning(`keyring file changed but could not be read; keeping the loaded keyring: ${(err as Error).message}`);
      return;
    }
    for (const [id, material] of next.keys) {
      const known = this.#state.keys.get(id);
      if (known && !timingSafeEqual(known, material)) {
        this.#onWarning(`keyring file changed the material of key "${id}"; reload refused`);
        return;
      }
    }
    this.#stamp = stamp;
    this.#state = next;
  }

  /** A copy of the key material (for writing an updated key file). */
  exportState(): KeyringState {
    return cloneState(this.#state);
  }

  toJSON(): unknown {
    return { primaryId: this.#state.primaryId, keyIds: this.keyIds() };
  }

  [inspect.custom](): string {
    return `Keyring { primary: ${this.#state.primaryId}, keys: [${this.keyIds().join(", ")}] }`;
  }
}

function fullAad(aad: Uint8Array): Buffer {
  return Buffer.concat([Buffer.of(SEAL_FORMAT_VERSION), aad]);
}

export function checkValueOf(key: Buffer): string {
  return createHmac("sha256", key).update(CHECK_CONTEXT).digest("hex");
}

/** Stable id for a key given without one (a raw PORTICO_MASTER_KEY): reveals nothing about the key. */
export function derivedKeyId(key: Buffer): string {
  return `k-${createHmac("sha256", key).update(ID_CONTEXT).digest("hex").slice(0, 12)}`;
}

export function generateKeyId(): string {
  const d = new Date();
  const date = `${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, "0")}${String(d.getUTCDate()).padStart(2, "0")}`;
  return `k-${date}-${randomBytes(3).toString("hex")}`;
}

/** 64 hex characters or base64 (standard or URL-safe) of exactly 32 bytes. */
export function decodeKeyMaterial(text: string, what: string): Buffer {
  const t = text.trim();
  let bytes: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(t)) bytes = Buffer.from(t, "hex");
  else if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(t)) bytes = Buffer.from(t, "base64");
  if (!bytes || bytes.length !== MASTER_KEY_BYTES) {
    throw new KeyringError(
      `${what} must be ${MASTER_KEY_BYTES} bytes encoded as 64 hex or 44 base64 characters` +
        (bytes ? ` (it decodes to ${bytes.length} bytes)` : ""),
    );
  }
  return bytes;
}

/**
 * Parses a raw key (hex/base64 of 32 bytes) or a keyring JSON
 * `{"primary": "<id>", "keys": {"<id>": "<base64 or hex>", …}}`.
 */
export function parseKeyringText(text: string, what: string): KeyringState {
  const t = text.trim();
  if (t === "") throw new KeyringError(`${what} is empty`);
  if (!t.startsWith("{")) {
    const key = decodeKeyMaterial(t, what);
    const id = derivedKeyId(key);
    return { primaryId: id, keys: new Map([[id, key]]) };
  }
  let json: unknown;
  try {
    json = JSON.parse(t);
  } catch {
    throw new KeyringError(`${what} is neither a key nor valid keyring JSON`);
  }
  const obj = json as { primary?: unknown; keys?: unknown };
  if (typeof obj !== "object" || obj === null || typeof obj.primary !== "string" || typeof obj.keys !== "object" || obj.keys === null) {
    throw new KeyringError(`${what}: keyring JSON needs "primary" (a key id) and "keys" (an object of id → key)`);
  }
  const keys = new Map<string, Buffer>();
  // Messages name keys by position, never by id: with ids and keys swapped an id would be key material.
  Object.entries(obj.keys as Record<string, unknown>).forEach(([id, value], i) => {
    const which = `${what}: keys entry #${i + 1}`;
    if (!KEY_ID.test(id)) throw new KeyringError(`${which}: its id does not match ${KEY_ID.source} (are ids and keys swapped?)`);
    if (typeof value !== "string") throw new KeyringError(`${which} must be a string`);
    keys.set(id, decodeKeyMaterial(value, which));
  });
  const state = { primaryId: obj.primary, keys };
  validateState(state, what);
  return state;
}

function validateState(state: KeyringState, what: string): void {
  for (const [id, key] of state.keys) {
    if (!KEY_ID.test(id)) throw new KeyringError(`${what}: a key id does not match ${KEY_ID.source}`);
    if (key.length !== MASTER_KEY_BYTES) throw new KeyringError(`${what}: a key must be ${MASTER_KEY_BYTES} bytes`);
  }
  if (!state.keys.has(state.primaryId)) {
    throw new KeyringError(`${what}: the primary key id is not in the keyring`);
  }
}

function cloneState(state: KeyringState): KeyringState {
  return { primaryId: state.primaryId, keys: new Map([...state.keys].map(([id, k]) => [id, Buffer.from(k)])) };
}

export function serializeKeyring(state: KeyringState): string {
  const keys: Record<string, string> = {};
  for (const [id, key] of state.keys) keys[id] = key.toString("base64");
  return `${JSON.stringify({ format: "portico-keyring", version: 1, primary: state.primaryId, keys }, null, 2)}\n`;
}

function fileStamp(path: string): string | undefined {
  try {
    const s = statSync(path);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch {
    return undefined;
  }
}

function tempPathFor(path: string): string {
  return join(dirname(path), `.${DEFAULT_KEY_FILE_NAME}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
}

function writePrivateFile(path: string, text: string): void {
  const fd = openSync(path, "wx", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(path, 0o600); // the open mode is masked by the umask
}

/** Atomically replaces a key file (write a 0600 temp file, fsync, rename). */
export function writeKeyringFile(path: string, state: KeyringState): void {
  validateState(state, path);
  const tmp = tempPathFor(path);
  writePrivateFile(tmp, serializeKeyring(state));
  try {
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // ignore
    }
    throw err;
  }
}

/** Creates the key file if nobody else did (atomic link), returning whether this call created it. */
function createKeyringFileIfMissing(path: string): boolean {
  const dir = dirname(path);
  if (!existsSync(dir)) ensureDir(dir, { mode: 0o700, setting: "the BYOK master key file's folder" });
  if (existsSync(path)) return false;
  const id = generateKeyId();
  const tmp = tempPathFor(path);
  writePrivateFile(tmp, serializeKeyring({ primaryId: id, keys: new Map([[id, randomBytes(MASTER_KEY_BYTES)]]) }));
  try {
    linkSync(tmp, path); // fails with EEXIST if another process won the race
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // ignore
    }
  }
}

export interface LoadKeyringOptions {
  /** PORTICO_MASTER_KEY: a raw key or keyring JSON. */
  masterKey: string | undefined;
  /** PORTICO_MASTER_KEY_FILE. */
  masterKeyFile: string | undefined;
  dataDir: string;
  production: boolean;
  refreshIntervalMs?: number;
  onWarning?: (message: string) => void;
}

/** The default key file of the embedded set-up. */
export function defaultKeyFilePath(dataDir: string): string {
  return join(dataDir, DEFAULT_KEY_FILE_NAME);
}

/** Where a file-managed keyring lives for this configuration, or undefined when it comes from the environment. */
export function keyringFilePath(opts: Pick<LoadKeyringOptions, "masterKey" | "masterKeyFile" | "dataDir">): string | undefined {
  if (opts.masterKey !== undefined) return undefined;
  return opts.masterKeyFile ?? defaultKeyFilePath(opts.dataDir);
}

/**
 * Loads the keyring from configuration. Production mode refuses a missing key (it never generates
 * one), a key file readable by group or others, and anything that is not 32 bytes.
 */
export function loadKeyring(opts: LoadKeyringOptions): Keyring {
  const kOpts: KeyringOptions = {};
  if (opts.refreshIntervalMs !== undefined) kOpts.refreshIntervalMs = opts.refreshIntervalMs;
  if (opts.onWarning) kOpts.onWarning = opts.onWarning;
  if (opts.masterKey !== undefined) {
    return new Keyring(parseKeyringText(opts.masterKey, "PORTICO_MASTER_KEY"), { kind: "env" }, kOpts);
  }
  let created = false;
  let path: string;
  if (opts.masterKeyFile !== undefined) {
    path = opts.masterKeyFile;
    if (!existsSync(path)) throw new KeyringError(`PORTICO_MASTER_KEY_FILE ${path} does not exist`);
  } else {
    if (opts.production) {
      throw new KeyringError(
        "production mode needs a master key: set PORTICO_MASTER_KEY or PORTICO_MASTER_KEY_FILE (32 bytes as hex or base64, or a keyring JSON)",
      );
    }
    path = defaultKeyFilePath(opts.dataDir);
    created = createKeyringFileIfMissing(path);
  }
  const mode = statSync(path).mode & 0o777;
  if (mode & 0o077) {
    const message = `master key file ${path} is readable by group or others (mode ${mode.toString(8)}); chmod 600 it`;
    if (opts.production) throw new KeyringError(message);
    opts.onWarning?.(message);
  }
  return new Keyring(parseKeyringText(readFileSync(path, "utf8"), `master key file ${path}`), { kind: "file", path, created }, kOpts);
}
