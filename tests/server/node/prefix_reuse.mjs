// Prefix reuse: two requests whose prompts share a ~3K-token prefix. The
// second reports the shared part as cached_tokens and its time to first
// token is at most 0.2x the first's (a ratio measured in this run).
import assert from 'node:assert/strict';
import { filler, main, metric, request, requireModel, startServer, streamTimed } from './lib/harness.mjs';

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const prefix = await filler(9000);
  const server = await startServer(model, ['-t', '2']);
  const client = server.client();
  const ask = (question) =>
    streamTimed(client, 'completions', { model: 'm', prompt: `${prefix} Question: ${question}? Answer:`, max_tokens: 4, temperature: 0 });

  const cold = await ask('what is the page cache');
  const warm = await ask('what does the scheduler do');
  console.log(`prompt ${cold.usage.prompt_tokens} tokens; TTFT cold ${cold.ttft.toFixed(1)} ms, ` +
              `warm ${warm.ttft.toFixed(1)} ms (${(warm.ttft / cold.ttft).toFixed(3)}x); ` +
              `cached ${warm.usage.prompt_tokens_details.cached_tokens}`);
  assert.ok(cold.usage.prompt_tokens > 2800, `prompt of ${cold.usage.prompt_tokens} tokens`);
  assert.equal(cold.usage.prompt_tokens_details.cached_tokens, 0);
  const cached = warm.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached > 0, 'the second request reused the prefix');
  assert.ok(cached <= warm.usage.prompt_tokens);
  // Everything but the last partial page of the shared prefix is reusable.
  assert.ok(cached >= cold.usage.prompt_tokens - 128, `cached ${cached} of ${warm.usage.prompt_tokens}`);
  assert.ok(warm.ttft <= 0.2 * cold.ttft, `warm TTFT ${warm.ttft} ms > 0.2 x cold ${cold.ttft} ms`);

  const m = await request(server, 'GET', '/metrics');
  assert.equal(metric(m.text, 'turbokv_prefix_cache_hits_total'), 1);
  assert.equal(metric(m.text, 'turbokv_prefix_cache_reused_tokens_total'), cached);
  assert.equal((await server.stop()).code, 0);
});
