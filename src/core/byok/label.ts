/**
 * The masking rule for BYOK labels, the only rendering of a provider key that ever leaves the core.
 *
 * Rule (docs/byok.md §Label):
 * 1. A key shorter than {@link MIN_LABELLED_LENGTH} characters, or whose secret part (what follows a
 *    known prefix) is shorter than {@link MIN_SECRET_LENGTH}, is rendered "***": nothing of it is shown.
 * 2. Otherwise the label is the longest known public prefix the key starts with (e.g. "sk-proj-",
 *    "AIza"; empty when none matches), then "...", then the key's last 4 characters.
 * 3. If any of those last 4 characters is not printable ASCII, the label is the prefix + "..." only.
 * So a label never carries more than 4 characters of the secret, and none for short keys.
 */

/** Public prefixes of well-known provider key formats, matched longest first. They are not secret. */
export const KNOWN_KEY_PREFIXES: readonly string[] = Object.freeze(
  [
    "sk-or-v1-",
    "sk-ant-api03-",
    "sk-ant-admin01-",
    "sk-ant-",
    "sk-proj-",
    "sk-svcacct-",
    "sk-admin-",
    "sk-",
    "AIza",
    "xai-",
    "gsk_",
    "pplx-",
    "nvapi-",
    "csk-",
    "fw_",
    "hf_",
    "r8_",
    "jina_",
    "tgp_v1_",
    "pa-",
  ].sort((a, b) => b.length - a.length),
);

/** Keys shorter than this (in characters) show nothing. */
export const MIN_LABELLED_LENGTH = 20;
/** The part after the prefix must be at least this long, so 4 characters are a small fraction of it. */
export const MIN_SECRET_LENGTH = 16;
/** Characters of the secret shown at the end of a label. */
export const LABEL_TAIL = 4;

const PRINTABLE = /^[\x21-\x7e]+$/;

export function byokLabel(key: string): string {
  const chars = Array.from(key);
  if (chars.length < MIN_LABELLED_LENGTH) return "***";
  const prefix = KNOWN_KEY_PREFIXES.find((p) => key.startsWith(p)) ?? "";
  if (chars.length - prefix.length < MIN_SECRET_LENGTH) return "***";
  const tail = chars.slice(-LABEL_TAIL).join("");
  return PRINTABLE.test(tail) ? `${prefix}...${tail}` : `${prefix}...`;
}
