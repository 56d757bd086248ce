// Restart with --cache-dir: a ~3K-token prompt is served cold, the server
// is stopped with SIGTERM (it writes its cached prefixes and exits 0), a new
// one starts on the same directory, and the same prompt is served from
// disk: cached tokens reported, time to first token <= 0.3x the cold one.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { filler, main, requireModel, startServer, streamTimed, tempDir } from './lib/harness.mjs';

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const dir = tempDir();
  const prompt = `${await filler(9000, 20000)} Question: what is described here? Answer:`;
  const params = { model: 'm', prompt, max_tokens: 4, temperature: 0 };

  const first = await startServer(model, ['-t', '2', '--cache-dir', dir]);
  const cold = await streamTimed(first.client(), 'completions', params);
  assert.equal(cold.usage.prompt_tokens_details.cached_tokens, 0);
  const exit = await first.stop('SIGTERM');
  assert.equal(exit.code, 0, `exit after SIGTERM: ${JSON.stringify(exit)}`);
  const files = readdirSync(dir);
  assert.ok(files.length > 0, 'SIGTERM wrote the cached prefix to --cache-dir');
  assert.ok(files.every((f) => f.endsWith('.tkvs')), `only finished cache files: ${files}`);

  const second = await startServer(model, ['-t', '2', '--cache-dir', dir]);
  const warm = await streamTimed(second.client(), 'completions', params);
  const cached = warm.usage.prompt_tokens_details.cached_tokens;
  console.log(`prompt ${cold.usage.prompt_tokens} tokens; TTFT cold ${cold.ttft.toFixed(1)} ms, ` +
              `after restart ${warm.ttft.toFixed(1)} ms (${(warm.ttft / cold.ttft).toFixed(3)}x); cached ${cached}`);
  assert.ok(cold.usage.prompt_tokens > 2800);
  assert.ok(cached >= cold.usage.prompt_tokens - 128, `cached ${cached} of ${cold.usage.prompt_tokens}`);
  assert.ok(warm.ttft <= 0.3 * cold.ttft, `TTFT after restart ${warm.ttft} ms > 0.3 x cold ${cold.ttft} ms`);
  assert.equal((await second.stop()).code, 0);
});
