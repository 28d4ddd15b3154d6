// Line diff for the side-by-side comparison of two preset versions: the longest common subsequence
// of lines, then runs of removed and added lines paired into "changed" rows.

/** JSON text with object keys sorted at every level, so two versions line up key by key. */
export function stableJson(value) {
  return JSON.stringify(sortKeys(value), null, 2);
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  }
  return v;
}

/**
 * Rows of a side-by-side diff: {kind: "same"|"changed"|"removed"|"added", left?: {n, text}, right?: {n, text}}.
 * n is the 1-based line number on its side.
 */
export function sideBySide(leftText, rightText) {
  const a = leftText.split("\n");
  const b = rightText.split("\n");
  const ops = lcsOps(a, b);
  const rows = [];
  let i = 0;
  let j = 0;
  let k = 0;
  while (k < ops.length) {
    if (ops[k] === "=") {
      rows.push({ kind: "same", left: { n: i + 1, text: a[i] }, right: { n: j + 1, text: b[j] } });
      i += 1;
      j += 1;
      k += 1;
      continue;
    }
    const removed = [];
    const added = [];
    while (k < ops.length && ops[k] !== "=") {
      if (ops[k] === "-") removed.push({ n: i + 1, text: a[i++] });
      else added.push({ n: j + 1, text: b[j++] });
      k += 1;
    }
    const pairs = Math.max(removed.length, added.length);
    for (let p = 0; p < pairs; p += 1) {
      const left = removed[p];
      const right = added[p];
      rows.push({ kind: left && right ? "changed" : left ? "removed" : "added", left, right });
    }
  }
  return rows;
}

/** Edit script ("=", "-", "+") from an LCS table; removals come before additions in each gap. */
function lcsOps(a, b) {
  const n = a.length;
  const m = b.length;
  const table = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
    }
  }
  const ops = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      ops.push("=");
      i += 1;
      j += 1;
    } else if (table[i + 1][j] >= table[i][j + 1]) {
      ops.push("-");
      i += 1;
    } else {
      ops.push("+");
      j += 1;
    }
  }
  while (i++ < n) ops.push("-");
  while (j++ < m) ops.push("+");
  return ops;
}
