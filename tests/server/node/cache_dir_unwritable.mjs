// A cache dir that cannot be written (every write fails as on a full disk:
// turbokv-faults with TURBOKV_FAULT_CACHE_WRITE=fail): requests are still served, the server
// warns once, and shutdown still exits 0 leaving no files behind.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { faultsBinary, filler, main, metric, request, requireModel, startServer, tempDir } from './lib/harness.mjs';

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const dir = tempDir();
  const server = await startServer(model, ['-t', '2', '--cache-dir', dir, '--kv-budget', '3M'],
                                   { binary: faultsBinary(), env: { TURBOKV_FAULT_CACHE_WRITE: 'fail' } });
  const client = server.client();
  // Several distinct prompts (~340 tokens: longer than a one-chunk prompt,
  // so each leaves a cached prefix): under the small budget, older prefixes
  // are evicted (and their writes fail) while the newer ones are served.
  for (let i = 0; i < 6; i++) {
    const r = await client.completions.create({ model: 'm', prompt: await filler(1200, 60000 + i * 3000), max_tokens: 4 });
    assert.equal(r.usage.completion_tokens, 4);
  }
  const evictions = metric((await request(server, 'GET', '/metrics')).text, 'turbokv_prefix_cache_evictions_total');
  assert.ok(evictions >= 1, `prefixes were evicted: ${evictions}`);
  assert.equal((await server.stop()).code, 0);
  // (tkv-test-23M also draws a warning for having no chat template.)
  const warnings = (server.output.match(/warning[^\n]*/g) || []).filter((w) => !w.includes('chat template'));
  assert.equal(warnings.length, 1, `one warning:\n${server.output}`);
  assert.match(warnings[0], new RegExp(dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  assert.deepEqual(readdirSync(dir), []);
});
