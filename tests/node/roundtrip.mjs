// Check that lines are what JSON.stringify writes: JSON.stringify(JSON.parse(line)) === line.
//
// Usage: node roundtrip.mjs < lines   (UTF-8, one JSON text per line)
// Prints one JSON object: {"checked": n, "mismatches": [{"line": i, "got": text, "want": text}, ...]}
// (0-based line numbers; at most 50 mismatches listed, "count" gives them all).

import { readFileSync } from "node:fs";

const input = readFileSync(0, "utf8");
const lines = input.split("\n");
if (lines.length && lines[lines.length - 1] === "") lines.pop();
const mismatches = [];
let count = 0;
lines.forEach((line, i) => {
  let want;
  try {
    want = JSON.stringify(JSON.parse(line));
  } catch (error) {
    want = `<JSON.parse failed: ${error.message}>`;
  }
  if (want !== line) {
    count += 1;
    if (mismatches.length < 50) mismatches.push({ line: i, got: line, want });
  }
});
process.stdout.write(JSON.stringify({ checked: lines.length, count, mismatches }) + "\n");
