// What every end-to-end server test shares: finding the binary and the model
// fixtures, starting `turbokv serve --port 0` and reading its port from the
// line it prints when listening, stopping it (SIGTERM, or kill -9), the
// official openai client pointed at it, and `turbokv run` for reference
// output. A test is a module that calls `main(async () => {...})`.
//
// Exit codes follow ctest's conventions for these tests: 0 passed, 77
// skipped (a fixture is missing; under TURBOKV_REQUIRE_FIXTURES=1 that is a
// failure instead), anything else failed.
import { spawn, execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';

export const SKIP = 77;

export function turbokvBinary() {
  const bin = process.env.TURBOKV_BIN;
  if (!bin || !existsSync(bin)) fail(`TURBOKV_BIN does not name the turbokv binary: ${bin}`);
  return bin;
}

// The test-only build of turbokv whose fault points (a failing or pausing
// cache write, ...) its environment arms: TURBOKV_FAULT_* (see
// tests/server/node/fault_points_from_env.cc).
export function faultsBinary() {
  const bin = process.env.TURBOKV_FAULTS_BIN;
  if (!bin || !existsSync(bin)) fail(`TURBOKV_FAULTS_BIN does not name turbokv-faults: ${bin}`);
  return bin;
}

export function fail(message) {
  throw new Error(message);
}

// Ends the test as skipped (or failed under TURBOKV_REQUIRE_FIXTURES=1).
export function skip(reason) {
  if (process.env.TURBOKV_REQUIRE_FIXTURES === '1') {
    console.error(`FAIL: required fixture missing (TURBOKV_REQUIRE_FIXTURES=1): ${reason}`);
    process.exit(1);
  }
  console.log(`SKIP: ${reason}`);
  process.exit(SKIP);
}

export function modelsDir() {
  return process.env.TURBOKV_MODELS || process.env.TURBOKV_DEFAULT_MODELS || '../shared/models';
}

// The path of a fixture under TURBOKV_MODELS; skips the test when it is absent.
export function requireModel(name) {
  const p = path.join(modelsDir(), name);
  if (!existsSync(p)) skip(`fixture ${name} not found under ${modelsDir()} (set TURBOKV_MODELS)`);
  return p;
}

// The path of a real chat template in TURBOKV_SHARED/templates/templates
// (STEM.jinja); skips the test when it is absent.
export function requireTemplate(stem) {
  const shared = process.env.TURBOKV_SHARED || process.env.TURBOKV_DEFAULT_SHARED || '../shared';
  const p = path.join(shared, 'templates', 'templates', `${stem}.jinja`);
  if (!existsSync(p)) skip(`chat template ${stem} not found under ${shared} (set TURBOKV_SHARED)`);
  return p;
}

// A fresh temporary directory, removed when the test process exits.
export function tempDir() {
  const dir = mkdtempSync(path.join(tmpdir(), 'tkv-serve-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const running = new Set();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

// A live `turbokv serve`. Its stdout and stderr are kept (and echoed to
// stderr with a prefix, so a failing test shows the server's side).
export class Server {
  constructor(child) {
    this.child = child;
    this.output = '';
    this.port = 0;
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        running.delete(child);
        resolve({ code, signal });
      });
    });
  }

  get baseURL() {
    return `http://127.0.0.1:${this.port}`;
  }

  // The official client, with no retries (a test must see the first answer).
  client(options = {}) {
    return new OpenAI({
      baseURL: `${this.baseURL}/v1`,
      apiKey: options.apiKey ?? 'unused',
      maxRetries: 0,
      timeout: options.timeout ?? 120_000,
    });
  }

  // SIGTERM (drain), then the exit status.
  async stop(signal = 'SIGTERM') {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exited;
  }
}

// Starts `turbokv serve -m MODEL --port 0 ...args` and waits until it
// prints its listening line (`turbokv serve: listening on http://HOST:PORT ...`).
export async function startServer(model, args = [], { env = {}, timeoutMs = 60_000, binary = turbokvBinary() } = {}) {
  const child = spawn(binary, ['serve', '-m', model, '--port', '0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const server = new Server(child);
  const tag = `[serve ${child.pid}] `;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`turbokv serve printed no listening line in ${timeoutMs} ms:\n${server.output}`));
    }, timeoutMs);
    const onData = (chunk) => {
      const text = chunk.toString();
      server.output += text;
      for (const line of text.split('\n')) if (line) process.stderr.write(tag + line + '\n');
      const m = /listening on http:\/\/[^\s:]+:(\d+)/.exec(server.output);
      if (m && !server.port) {
        server.port = Number(m[1]);
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (!server.port)
        reject(new Error(`turbokv serve exited (${code ?? signal}) before listening:\n${server.output}`));
    });
  });
  return server;
}

// `turbokv ARGS...`: resolves to { code, stdout, stderr }.
export function runTurbokv(args, { timeoutMs = 120_000 } = {}) {
  return new Promise((resolve) => {
    execFile(turbokvBinary(), args, { timeout: timeoutMs, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

// The continuation `turbokv run` prints for a greedy run of n tokens
// (without the echoed prompt and the newline run adds at the end).
export async function runGreedy(model, prompt, n, extraArgs = []) {
  const r = await runTurbokv([
    'run', '-m', model, '-p', prompt, '-n', String(n), '--temp', '0',
    '--no-display-prompt', '-q', '-t', '1', ...extraArgs,
  ]);
  if (r.code !== 0) fail(`turbokv run failed (${r.code}): ${r.stderr}`);
  return r.stdout.endsWith('\n') ? r.stdout.slice(0, -1) : r.stdout;
}

// Reads an SSE response body into its `data:` payloads (parsed JSON, and
// the literal '[DONE]').
export async function readSse(response) {
  const text = await response.text();
  const events = [];
  for (const block of text.split('\n\n')) {
    const data = block
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
      .join('\n');
    if (!data) continue;
    events.push(data === '[DONE]' ? data : JSON.parse(data));
  }
  return events;
}

// Runs the test body; any exception fails the test with its message.
export function main(body) {
  body().then(
    () => {
      console.log('PASS');
      process.exit(0);
    },
    (err) => {
      console.error(`FAIL: ${err && err.stack ? err.stack : err}`);
      process.exit(1);
    },
  );
}

// Milliseconds since the time origin, for TTFT ratios measured in one run.
export function now() {
  return performance.now();
}

// Filler text of about `tokens` tokens for tkv-test-23M (its held-out text;
// ~3 characters per token), starting at character `offset`.
export async function filler(chars, offset = 0) {
  const { readFileSync } = await import('node:fs');
  const text = readFileSync(requireModel('tkv-test-heldout.txt'), 'utf8');
  return text.slice(offset, offset + chars);
}

// Token ids of `text` as `turbokv tokenize` gives them (special-token text
// parsed, no BOS).
export async function tokenize(model, text) {
  const r = await runTurbokv(['tokenize', '-m', model, '-p', text, '--ids', '--parse-special']);
  if (r.code !== 0) fail(`turbokv tokenize failed (${r.code}): ${r.stderr}`);
  return r.stdout.trim() === '' ? [] : r.stdout.trim().split(/\s+/).map(Number);
}

// Sends a raw request; resolves to { status, headers, json (or null), text }.
export async function request(server, method, route, { body, headers = {}, key } = {}) {
  const h = { ...headers };
  if (key) h.authorization = `Bearer ${key}`;
  if (body !== undefined && !h['content-type']) h['content-type'] = 'application/json';
  const res = await fetch(server.baseURL + route, {
    method,
    headers: h,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, json, text };
}

// The value of an unlabelled Prometheus sample in a /metrics body.
export function metric(text, name) {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  if (!m) fail(`metric ${name} not in /metrics:\n${text}`);
  return Number(m[1]);
}

// Streams a completion (or chat) request with the official client and
// returns its text, finish_reason, usage and time to first token (ms from
// the call to the first chunk that carries generated text).
export async function streamTimed(client, kind, params) {
  const start = now();
  const api = kind === 'chat' ? client.chat.completions : client.completions;
  const stream = await api.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let ttft = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      const piece = kind === 'chat' ? (choice.delta.content ?? '') : choice.text;
      if (piece && ttft === null) ttft = now() - start;
      text += piece;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  if (ttft === null) ttft = now() - start;
  return { text, finish, usage, ttft, chunks };
}

// A client package of package.json beyond openai (the Vercel AI SDK,
// LangChain), imported; a node_modules installed before it was added skips
// the test (run scripts/setup.sh), or fails it under TURBOKV_REQUIRE_FIXTURES=1.
export async function requirePackage(name) {
  try {
    return await import(name);
  } catch (err) {
    skip(`the npm package ${name} is not installed (run scripts/setup.sh: npm ci): ${err.message}`);
  }
}
