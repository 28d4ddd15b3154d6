// Prints "N passed, N failed" from the vitest JSON report written by `npm test`.
import { readFileSync } from "node:fs";

const report = JSON.parse(readFileSync(new URL("../.vitest-results.json", import.meta.url), "utf8"));
console.log(`${report.numPassedTests} passed, ${report.numFailedTests} failed`);
