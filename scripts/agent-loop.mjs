#!/usr/bin/env node
// An agent's tool loop through `turbokv serve` with the official openai
// client: a long system prompt (~--system-tokens) and tool schemas, then
// --steps requests, each the whole conversation so far with tool_choice
// "required" and the previous call's tool result appended. Run twice on a
// fresh server each: with the prefix cache (the default) and with it off
// (cache_prompt: false on every request). Reports per step the prompt
// tokens and usage.prompt_tokens_details.cached_tokens, and per run the
// server's own time to first token summed over the loop (the
// time_to_first_token_seconds histogram's sum in /metrics: queue + prefill
// + the first token), and checks that from step 2 on every request reuses
// the tokens it shares with the previous request's prompt (the server's
// /apply-template and /tokenize give both prompts' ids): up to the last
// prefill-grid boundary under the server's default --prefix-reuse exact, all
// of them under --prefix-reuse any (exits 1 when one does not).
//
// Usage: node scripts/agent-loop.mjs -m MODEL.gguf [--chat-template FILE]
//          [--steps 20] [--system-tokens 2000] [-t THREADS] [-c CONTEXT]
//          [--turbokv BIN] [--grid N (the server's -ub, 16)]
//          [--prefix-reuse exact|any] [--out FILE.md]
// Needs the openai package of tests/server/node (scripts/setup.sh installs it).
import { execSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'tests/server/node/package.json'));
const OpenAI = require('openai').default ?? require('openai');

function parseArgs(argv) {
  const o = { steps: 20, systemTokens: 2000, grid: 16, reuse: 'exact', threads: 2, context: 16384, turbokv: path.join(root, 'build/release/apps/turbokv/turbokv') };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i], v = () => { if (i + 1 >= argv.length) die(`${a} needs a value`); return argv[++i]; };
    if (a === '-m') o.model = v();
    else if (a === '--chat-template') o.template = v();
    else if (a === '--steps') o.steps = Number(v());
    else if (a === '--system-tokens') o.systemTokens = Number(v());
    else if (a === '-t') o.threads = Number(v());
    else if (a === '-c') o.context = Number(v());
    else if (a === '--turbokv') o.turbokv = v();
    else if (a === '--grid') o.grid = Number(v());
    else if (a === '--prefix-reuse') o.reuse = v();
    else if (a === '--out') o.out = v();
    else die(`unknown argument ${a}`);
  }
  if (!o.model) die('-m MODEL.gguf is required');
  if (!(o.steps >= 2)) die('--steps must be at least 2');
  if (o.reuse !== 'exact' && o.reuse !== 'any') die('--prefix-reuse must be exact or any');
  return o;
}

function die(message) {
  console.error(`agent-loop: ${message}`);
  process.exit(2);
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

async function startServer(o) {
  const port = await freePort();
  const args = ['serve', '-m', o.model, '--port', String(port), '-t', String(o.threads), '-c', String(o.context)];
  if (o.template) args.push('--chat-template', o.template);
  if (o.grid !== 16) args.push('-ub', String(o.grid));
  args.push('--prefix-reuse', o.reuse);
  const proc = spawn(o.turbokv, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (proc.exitCode !== null) die(`the server exited at start:\n${log}`);
    try { if ((await fetch(`${base}/health`)).ok) return { proc, base }; } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 200));
  }
  proc.kill();
  die('the server did not become ready in 120 s');
}

// The prompt's token ids as the server renders and counts them.
async function promptIds(base, body) {
  const post = async (route, b) => {
    const r = await fetch(`${base}${route}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(b) });
    if (!r.ok) die(`${route}: ${r.status} ${await r.text()}`);
    return r.json();
  };
  const { prompt } = await post('/apply-template', body);
  return (await post('/tokenize', { content: prompt, add_special: true })).tokens;
}

function sharedPrefix(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

async function ttftSum(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => /^\w*time_to_first_token_seconds_sum /.test(l));
  if (!line) die('/metrics has no time_to_first_token_seconds_sum');
  return Number(line.split(' ')[1]);
}

const WORDS = 'river stone lantern orchard violet copper meadow harbor whisper canyon ember glacier saffron thunder willow marble falcon quartz timber velvet'.split(' ');

// About `tokens` tokens of instructions (common words: about a token each).
function systemPrompt(tokens) {
  const words = [];
  for (let i = 0; words.length < tokens; i++) words.push(WORDS[(i * 7) % WORDS.length] + (i % 12 === 11 ? '.' : ''));
  return `You are a research agent. Use the tools to answer. Reference notes: ${words.join(' ')}`;
}

const TOOLS = [
  { type: 'function', function: { name: 'search', description: 'Search the web and return the top results.',
    parameters: { type: 'object', properties: { query: { type: 'string', maxLength: 40 }, max_results: { type: 'integer' } }, required: ['query', 'max_results'], additionalProperties: false } } },
  { type: 'function', function: { name: 'read_page', description: 'Read a web page.',
    parameters: { type: 'object', properties: { url: { type: 'string', maxLength: 60 } }, required: ['url'], additionalProperties: false } } },
  { type: 'function', function: { name: 'write_note', description: 'Save a note for the final answer.',
    parameters: { type: 'object', properties: { text: { type: 'string', maxLength: 80 } }, required: ['text'], additionalProperties: false } } },
];

function toolResult(step) {
  return Array.from({ length: 40 }, (_, i) => `${WORDS[(step * 7 + i) % WORDS.length]}${step}-${i}`).join(' ');
}

async function loop(o, cachePrompt) {
  const server = await startServer(o);
  try {
    const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
    const messages = [{ role: 'system', content: systemPrompt(o.systemTokens) },
      { role: 'user', content: 'Find out when the first transatlantic cable was laid and who paid for it.' }];
    const before = await ttftSum(server.base);
    const steps = [];
    let previousIds = [];
    for (let step = 1; step <= o.steps; step++) {
      const body = { model: 'm', messages, tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false };
      const ids = await promptIds(server.base, body);
      const shared = sharedPrefix(previousIds, ids);
      previousIds = ids;
      const r = await client.chat.completions.create({
        ...body, temperature: 0.7, seed: step, max_tokens: 96, cache_prompt: cachePrompt,
      });
      const msg = r.choices[0].message;
      if (!msg.tool_calls?.length) die(`step ${step}: no tool call (finish_reason ${r.choices[0].finish_reason})`);
      if (r.usage.prompt_tokens !== ids.length) die(`step ${step}: ${r.usage.prompt_tokens} prompt tokens, /tokenize gave ${ids.length}`);
      steps.push({ step, prompt: r.usage.prompt_tokens, shared, cached: r.usage.prompt_tokens_details?.cached_tokens ?? 0 });
      messages.push(msg, { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: toolResult(step) });
      process.stderr.write(`  ${cachePrompt ? 'cache' : 'no cache'} step ${step}: ${steps.at(-1).prompt} prompt, ${steps.at(-1).cached} cached\n`);
    }
    return { steps, ttft: (await ttftSum(server.base)) - before };
  } finally {
    server.proc.kill('SIGTERM');
  }
}

function sh(cmd) {
  try { return execSync(cmd, { cwd: root, encoding: 'utf8' }).trim(); } catch { return '?'; }
}

const o = parseArgs(process.argv);
const cached = await loop(o, true);
const uncached = await loop(o, false);
// Exact reuse stops at a boundary of the server's prefill grid (-ub, 16 by
// default: docs/SERVER.md, the prefix cache): the previous prompt's last
// partial chunk is prefilled again (its last token is always evaluated, so
// a prompt of k * grid tokens leaves k - 1). Any reuse takes every shared
// token.
const shortfalls = cached.steps.slice(1).map((s, i) => cached.steps[i].prompt - s.cached);
const expected = (s, prev) => (o.reuse === 'any' ? s.shared
  : Math.min(Math.floor((prev - 1) / o.grid) * o.grid, Math.floor(s.shared / o.grid) * o.grid));
const failures = cached.steps.slice(1).filter((s, i) => s.cached < expected(s, cached.steps[i].prompt));
const unshared = cached.steps.slice(1).map((s, i) => cached.steps[i].prompt - s.shared);
const extra = cached.steps.slice(1).map((s) => s.cached - s.shared);
const ratio = cached.ttft / uncached.ttft;
const lines = [
  '# Agent loop: prefix reuse across tool steps', '',
  `- command: \`node scripts/agent-loop.mjs ${process.argv.slice(2).join(' ')}\``,
  `- machine: ${sh("lscpu | sed -n 's/^Model name: *//p'")}, ${sh('nproc')} cores`,
  `- commit: ${sh('git rev-parse --short=12 HEAD')}`, `- date: ${new Date().toISOString().slice(0, 10)}`, '',
  `${o.steps} requests through the openai client, each the conversation so far (a first prompt of ${cached.steps[0].prompt} tokens: system prompt, ${TOOLS.length} tool schemas and the question; tool_choice "required"), each step appending the call and a tool result of about 120 tokens.`, '',
  '| step | prompt tokens | shared with the previous prompt | cached (cache on) | cached (cache off) |', '|---|---|---|---|---|',
  ...cached.steps.map((s, i) => `| ${s.step} | ${s.prompt} | ${s.shared} | ${s.cached} | ${uncached.steps[i].cached} |`), '',
  `Time to first token summed over the loop (server's histogram): ${cached.ttft.toFixed(2)} s with the prefix cache, ${uncached.ttft.toFixed(2)} s without: **${ratio.toFixed(3)}x**.`,
  `From step 2 on, each prompt shared with the previous one ${Math.min(...unshared) === 0 && Math.max(...unshared) === 0 ? 'all of its tokens' : `all of its tokens but the last ${Math.min(...unshared)}-${Math.max(...unshared)} (the template renders them otherwise in the next turn)`}.`,
  o.reuse === 'any'
    ? `Server run with \`--prefix-reuse any\`: each request reused every token it shared with the previous prompt, and ${Math.min(...extra)}-${Math.max(...extra)} more (of the previous reply).`
    : `Each request reused the previous request's prompt but its last ${Math.min(...shortfalls)}-${Math.max(...shortfalls)} tokens (reuse is exact, at ${o.grid}-token prefill-grid boundaries; \`--prefix-reuse any\` takes every shared token).`,
  failures.length ? `Steps reusing less than ${o.reuse === 'any' ? 'the tokens shared with the previous prompt' : "the shared tokens' last grid boundary"}: ${failures.map((s) => s.step).join(', ')}.` : '', '',
];
const report = lines.join('\n');
if (o.out) writeFileSync(o.out, report); else process.stdout.write(report);
process.exit(failures.length ? 1 : 0);
