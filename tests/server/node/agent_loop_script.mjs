// scripts/agent-loop.mjs in a short form (4 steps, a short system prompt,
// tkv-test-23M under Qwen2.5's template): it runs the loop with the prefix
// cache on and off, and exits 0 only when every step from the second on
// reused the previous prompt up to its last prefill-grid boundary (the
// server's default, exact reuse) or all of it (--prefix-reuse any).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { main, requireModel, requireTemplate, turbokvBinary } from './lib/harness.mjs';

function runLoop(reuse) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
  const r = spawnSync(process.execPath, [path.join(root, 'scripts/agent-loop.mjs'),
    '-m', requireModel('tkv-test-23M.gguf'), '--chat-template', requireTemplate('Qwen-Qwen2.5-7B-Instruct'),
    '--steps', '4', '--system-tokens', '300', '-c', '4096', '--prefix-reuse', reuse,
    '--turbokv', turbokvBinary()], { encoding: 'utf8', timeout: 240_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  const rows = [...r.stdout.matchAll(/^\| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$/gm)].map((m) => m.slice(1).map(Number));
  assert.equal(rows.length, 4, r.stdout);
  for (const [step, , , on, off] of rows) {
    assert.equal(off, 0, `step ${step}: nothing is reused with cache_prompt false`);
    if (step > 1) assert.ok(on > 0, `step ${step}: the prefix is reused`);
  }
  return { stdout: r.stdout, rows };
}

main(async () => {
  const exact = runLoop('exact');
  assert.match(exact.stdout, /Each request reused the previous request's prompt but its last/);
  // Any position: every step reuses every token it shares with the
  // previous prompt (under this template, all of the previous prompt).
  const any = runLoop('any');
  assert.match(any.stdout, /--prefix-reuse any/);
  for (let i = 1; i < any.rows.length; i++) {
    const [step, , shared, cached] = any.rows[i];
    assert.equal(shared, any.rows[i - 1][1], `step ${step}: the previous prompt is shared whole`);
    assert.ok(cached >= shared, `step ${step}: ${cached} cached < ${shared} shared tokens`);
  }
});
