// Prints "N passed, N failed" from the vitest JSON report written by `npm test`. A file whose setup
// failed (its tests then count as skipped) counts as one failure, so the line never hides a broken suite.
import { readFileSync } from "node:fs";

const report = JSON.parse(readFileSync(new URL("../.vitest-results.json", import.meta.url), "utf8"));
const brokenFiles = report.testResults.filter(
  (file) => file.status === "failed" && !file.assertionResults.some((t) => t.status === "failed"),
).length;
console.log(`${report.numPassedTests} passed, ${report.numFailedTests + brokenFiles} failed`);
