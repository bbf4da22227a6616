// One benchmark case on the reference side: the original agent's own
// SessionManager (@earendil-works/pi-coding-agent, format 3 JSONL), in its
// own process. Our code; it only calls the package's public API.
//
// Usage: node --expose-gc driver.mjs '<json command>'   (or the JSON on stdin)
// Prints one JSON object, the same shape as benchmarks/worker.py:
//   {"times": [seconds...], "rss0": bytes, "rss1": bytes, "hwm": bytes, "result": ...}
// rss0/rss1: VmRSS before / after the first run (garbage collected, result
// held); hwm: VmHWM, the process's peak RSS. Both read from /proc/self/status.
//
// Command keys: op, module (absolute path of dist/core/session-manager.js:
// imported by file path because the package index needs a newer Node), warmup,
// iters, first_timed, and the op's own arguments.

import { closeSync, copyFileSync, fsyncSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, existsSync } from "node:fs";
import { join } from "node:path";

function status(field) {
  const text = readFileSync("/proc/self/status", "utf8");
  const match = text.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
  return match ? Number(match[1]) * 1024 : 0;
}

function collect() {
  if (typeof globalThis.gc === "function") {
    globalThis.gc();
    globalThis.gc();
  }
}

function now() {
  return Number(process.hrtime.bigint()) / 1e9;
}

// Process CPU time (user + system, every thread, libuv's pool included) in seconds,
// as worker.py's time.process_time().
function cpuSeconds(usage) {
  return (usage.user + usage.system) / 1e6;
}

function readMessages(path, count) {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .slice(0, count)
    .map((line) => JSON.parse(line));
}

function jsonlFiles(dir) {
  return readdirSync(dir)
    .filter((name) => name.endsWith(".jsonl"))
    .sort()
    .map((name) => join(dir, name));
}

// One agent turn: a prompt, a tool call, its result, the answer (= worker.turn_messages).
function turnMessages(turn, stamp) {
  const call = `call_turn_${turn}`;
  const usage = { input: 1200, output: 80, cacheRead: 0, cacheWrite: 0, totalTokens: 1280,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  const common = { api: "anthropic-messages", provider: "anthropic", model: "claude-sonnet-4-5", usage };
  return [
    { role: "user", content: [{ type: "text", text: `Turn ${turn}: run the tests again.` }], timestamp: stamp },
    { role: "assistant", content: [{ type: "toolCall", id: call, name: "bash", arguments: { command: "pytest -q" } }],
      stopReason: "toolUse", timestamp: stamp + 1, ...common },
    { role: "toolResult", toolCallId: call, toolName: "bash",
      content: [{ type: "text", text: "412 passed in 3.1s" }], isError: false, timestamp: stamp + 2 },
    { role: "assistant", content: [{ type: "text", text: "All 412 tests pass." }],
      stopReason: "stop", timestamp: stamp + 3, ...common },
  ];
}

// Each case: { setup(), run(), reset(), teardown() }; run() may be async.
function makeCase(cmd, SessionManager) {
  const cwd = "/home/dev/work/project";
  switch (cmd.op) {
    case "load": {
      // SessionManager.open(path): reads the whole file, migrates to v3 if older
      // (rewriting it: so a copy is opened when cmd.copy), builds its index.
      let target = cmd.file;
      let scratch;
      return {
        setup() {
          if (cmd.copy) {
            scratch = mkdtempSync(join(cmd.tmp, "load-"));
            target = join(scratch, "session.jsonl");
          }
        },
        reset() {
          if (cmd.copy) copyFileSync(cmd.file, target);
        },
        run() {
          return SessionManager.open(target, cmd.sessionDir ?? cmd.tmp);
        },
        teardown() {
          if (scratch) rmSync(scratch, { recursive: true, force: true });
        },
      };
    }
    case "resume": {
      // What a user waits for when resuming: open the session file (a copy,
      // as for "load") and build the context the next request sends.
      let target;
      let scratch;
      return {
        setup() {
          scratch = mkdtempSync(join(cmd.tmp, "resume-"));
          target = join(scratch, "session.jsonl");
        },
        reset() {
          copyFileSync(cmd.file, target);
        },
        run() {
          const manager = SessionManager.open(target, scratch);
          return manager.buildSessionContext().messages.length;
        },
        teardown() {
          if (scratch) rmSync(scratch, { recursive: true, force: true });
        },
      };
    }
    case "project": {
      let manager;
      return {
        setup() {
          manager = SessionManager.open(cmd.file, cmd.tmp);
        },
        reset() {},
        run() {
          return manager.buildSessionProjection().messages.length;
        },
        teardown() {},
      };
    }
    case "turn": {
      // One agent turn in a live session (same messages as worker.turn_messages):
      // appendMessage x4 (appendFileSync, no fsync), then buildSessionContext().
      // With cmd.fsync, the file is also fsynced after each append (what durable
      // appends cost; the package itself never fsyncs).
      // The session is a copy; it grows by a turn per run.
      let manager, scratch, target;
      let fd = -1;
      let turn = 0;
      return {
        setup() {
          scratch = mkdtempSync(join(cmd.tmp, "turn-"));
          target = join(scratch, "session.jsonl");
          copyFileSync(cmd.file, target);
          manager = SessionManager.open(target, scratch);
          if (cmd.fsync) fd = openSync(target, "r");
        },
        reset() {},
        run() {
          turn += 1;
          for (const message of turnMessages(turn, 1_800_000_000_000 + 10 * turn)) {
            manager.appendMessage(message);
            if (fd >= 0) fsyncSync(fd);
          }
          return manager.buildSessionContext().messages.length;
        },
        teardown() {
          if (fd >= 0) closeSync(fd);
          if (scratch) rmSync(scratch, { recursive: true, force: true });
        },
      };
    }
    case "append": {
      // appendMessage once per entry into a new persisted session (JSONL,
      // appendFileSync per call). With cmd.fsync, the file is also fsynced after
      // each append, which is what "durable" costs (the package itself never fsyncs).
      const messages = readMessages(cmd.messages, cmd.count);
      let dir;
      return {
        setup() {},
        reset() {
          if (dir) rmSync(dir, { recursive: true, force: true });
          dir = mkdtempSync(join(cmd.tmp, "append-"));
        },
        run() {
          const manager = SessionManager.create(cwd, dir);
          let fd = -1;
          try {
            for (const message of messages) {
              manager.appendMessage(message);
              if (cmd.fsync) {
                if (fd < 0 && existsSync(manager.getSessionFile())) fd = openSync(manager.getSessionFile(), "r");
                if (fd >= 0) fsyncSync(fd);
              }
            }
          } finally {
            if (fd >= 0) closeSync(fd);
          }
          return messages.length;
        },
        teardown() {
          if (dir) rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    case "list":
      return {
        setup() {},
        reset() {},
        async run() {
          return (await SessionManager.listAll(cmd.dir)).length;
        },
        teardown() {},
      };
    case "search":
      // What the agent's session picker searches: listAll() reads every file and
      // gives each session's allMessagesText; the query is a plain substring.
      return {
        setup() {},
        reset() {},
        async run() {
          const sessions = await SessionManager.listAll(cmd.dir);
          return sessions.filter((info) => info.allMessagesText.includes(cmd.query)).length;
        },
        teardown() {},
      };
    case "import": {
      // The package has no import: forkFrom(path, cwd, dir) is how it brings a
      // session file into a session directory (read, parse, write a copy, open it).
      const files = jsonlFiles(cmd.dir);
      let dir;
      return {
        setup() {},
        reset() {
          if (dir) rmSync(dir, { recursive: true, force: true });
          dir = mkdtempSync(join(cmd.tmp, "import-"));
        },
        run() {
          for (const file of files) SessionManager.forkFrom(file, cwd, dir);
          return files.length;
        },
        teardown() {
          if (dir) rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    default:
      throw new Error(`unknown op ${cmd.op}`);
  }
}

async function main() {
  const raw = process.argv[2] ?? readFileSync(0, "utf8");
  const cmd = JSON.parse(raw);
  mkdirSync(cmd.tmp ?? "/tmp", { recursive: true });
  const { SessionManager } = await import(cmd.module);
  const bench = makeCase(cmd, SessionManager);
  bench.setup();
  let out;
  try {
    bench.reset();
    collect();
    const rss0 = status("VmRSS");
    let started = now();
    let cpuStarted = process.cpuUsage();
    let result = await bench.run();
    const firstTime = now() - started;
    const firstCpu = cpuSeconds(process.cpuUsage(cpuStarted));
    collect();
    const rss1 = status("VmRSS");
    const firstResult = typeof result === "number" || typeof result === "string" ? result : null;
    result = null;
    collect();
    const times = cmd.first_timed ? [firstTime] : [];
    const cpu = cmd.first_timed ? [firstCpu] : [];
    const warmup = Math.max(0, (cmd.warmup ?? 1) - 1);
    const total = warmup + (cmd.iters ?? 3) - times.length;
    for (let index = 0; index < total; index++) {
      bench.reset();
      started = now();
      cpuStarted = process.cpuUsage();
      result = await bench.run();
      const elapsed = now() - started;
      const cpuTime = cpuSeconds(process.cpuUsage(cpuStarted));
      result = null;
      collect();
      if (index >= warmup) {
        times.push(elapsed);
        cpu.push(cpuTime);
      }
    }
    out = { times, cpu, rss0, rss1, hwm: status("VmHWM"), result: firstResult };
  } finally {
    bench.teardown();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
