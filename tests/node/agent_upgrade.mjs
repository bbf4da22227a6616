// Upgrade session files with the original agent's own SessionManager and print the result.
//
// Usage: node agent_upgrade.mjs <absolute path of dist/core/session-manager.js> <file.jsonl>...
//
// Each input is copied into a fresh temp directory and opened there with
// SessionManager.open, which migrates older formats in memory and rewrites the
// copy with JSON.stringify (one record per line). The input is never written.
// Prints one JSON line per input: {"file": <input path>, "text": <rewritten copy>}.
// Node 20 works: the module is imported by file path (the package index wants a newer Node).

import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";

const [modulePath, ...files] = process.argv.slice(2);
const { SessionManager } = await import(pathToFileURL(modulePath).href);

for (const file of files) {
  const dir = mkdtempSync(join(tmpdir(), "agent-upgrade-"));
  try {
    const copy = join(dir, basename(file));
    copyFileSync(file, copy);
    SessionManager.open(copy, dir);
    process.stdout.write(JSON.stringify({ file, text: readFileSync(copy, "utf8") }) + "\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
