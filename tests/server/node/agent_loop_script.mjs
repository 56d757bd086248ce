// scripts/agent-loop.mjs in a short form (4 steps, a short system prompt,
// tkv-test-23M under Qwen2.5's template): it runs the loop with the prefix
// cache on and off, and exits 0 only when every step from the second on
// reused the previous prompt up to its last prefill-grid boundary.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { main, requireModel, requireTemplate, turbokvBinary } from './lib/harness.mjs';

main(async () => {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
  const r = spawnSync(process.execPath, [path.join(root, 'scripts/agent-loop.mjs'),
    '-m', requireModel('tkv-test-23M.gguf'), '--chat-template', requireTemplate('Qwen-Qwen2.5-7B-Instruct'),
    '--steps', '4', '--system-tokens', '300', '-c', '4096', '--turbokv', turbokvBinary()], { encoding: 'utf8', timeout: 240_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /From step 2 on, each request reused the previous request's prompt/);
  const rows = [...r.stdout.matchAll(/^\| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$/gm)].map((m) => m.slice(1).map(Number));
  assert.equal(rows.length, 4, r.stdout);
  for (const [step, , on, off] of rows) {
    assert.equal(off, 0, `step ${step}: nothing is reused with cache_prompt false`);
    if (step > 1) assert.ok(on > 0, `step ${step}: the prefix is reused`);
  }
});
