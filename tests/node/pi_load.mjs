// What the original agent (pi) sees of session files and session folders, through its own
// SessionManager (@earendil-works/pi-coding-agent, dist/core/session-manager.js).
//
// Usage: node pi_load.mjs < '{"module": "<absolute path of session-manager.js>", "ops": [...]}'
// Prints one JSON array: one result per op, in order. Ops:
//   {"op": "view", "file": F}   SessionManager.open on a COPY of F in a fresh temp folder (pi
//       rewrites files it migrates and appends a missing final newline: the input is never
//       written). Result: {header, entries: [{id, type, parentId}], leafId, name,
//       context: buildSessionContext() (messages, thinkingLevel, model), path: [ids root -> leaf]}.
//   {"op": "dir", "cwd": C}     the folder pi's SessionManager.create(C) puts a new session in
//       (its default folder for C, under $PI_CODING_AGENT_DIR/sessions). Result: {dir}.
//   {"op": "list", "cwd": C, "sessionDir"?: D}   SessionManager.list(C, D): what pi's /resume
//       picker lists for the current folder. Result: {sessions: [{path, id, name, cwd, messageCount}]}.
//   {"op": "listAll"}           SessionManager.listAll(): the picker's "all projects" view.
// Node 20 works: the module is imported by file path (the package index wants a newer Node).

import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";

const command = JSON.parse(readFileSync(0, "utf8"));
const { SessionManager } = await import(pathToFileURL(command.module).href);

function view(file) {
  const dir = mkdtempSync(join(tmpdir(), "pi-load-"));
  try {
    const copy = join(dir, basename(file));
    copyFileSync(file, copy);
    const manager = SessionManager.open(copy, dir);
    const entries = manager.getEntries().map((e) => ({ id: e.id, type: e.type, parentId: e.parentId ?? null }));
    const path = [];
    for (let entry = manager.getLeafEntry(); entry; entry = manager.getEntry(entry.parentId)) path.push(entry.id);
    path.reverse();
    return {
      header: manager.getHeader(),
      entries,
      leafId: manager.getLeafId(),
      name: manager.getSessionName() ?? null,
      context: manager.buildSessionContext(),
      path,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function summary(info) {
  return { path: info.path, id: info.id, name: info.name ?? null, cwd: info.cwd, messageCount: info.messageCount };
}

const results = [];
for (const op of command.ops) {
  switch (op.op) {
    case "view":
      results.push(view(op.file));
      break;
    case "dir":
      results.push({ dir: SessionManager.create(op.cwd).getSessionDir() });
      break;
    case "list":
      results.push({ sessions: (await SessionManager.list(op.cwd, op.sessionDir)).map(summary) });
      break;
    case "listAll":
      results.push({ sessions: (await SessionManager.listAll()).map(summary) });
      break;
    default:
      throw new Error(`unknown op ${op.op}`);
  }
}
process.stdout.write(JSON.stringify(results) + "\n");
