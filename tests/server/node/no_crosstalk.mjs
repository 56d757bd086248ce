// No cross-talk: 8 concurrent greedy requests with different prompts (and
// lengths: some take several prefill chunks, so prefill and decode steps
// mix) each return exactly what the same request returns alone. The alone
// runs use a second server, so that none of them is a prefix-cache hit of
// its concurrent twin (a hit is not bit-identical to a fresh prefill).
import assert from 'node:assert/strict';
import { filler, main, requireModel, startServer, streamTimed } from './lib/harness.mjs';

// Eight passages of held-out text, 40 to ~900 characters (~15 to ~300
// tokens), each from its own place in the file.
async function prompts() {
  const out = [];
  for (let i = 0; i < 8; i++) out.push(await filler(40 + i * i * 16, 5000 + i * 7919));
  return out;
}

async function ask(client, prompt, i) {
  const params = { model: 'm', prompt, max_tokens: 24, temperature: 0 };
  // Half streamed, half whole: both paths carry the same tokens.
  if (i % 2 === 0) return (await streamTimed(client, 'completions', params)).text;
  return (await client.completions.create(params)).choices[0].text;
}

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const ps = await prompts();
  const together = await startServer(model, ['-t', '2', '--parallel', '8', '-c', '1024']);
  const concurrent = await Promise.all(ps.map((p, i) => ask(together.client(), p, i)));
  assert.equal((await together.stop()).code, 0);

  const alone = await startServer(model, ['-t', '2', '--parallel', '1', '-c', '1024']);
  for (let i = 0; i < ps.length; i++) {
    const text = await ask(alone.client(), ps[i], i);
    assert.equal(concurrent[i], text, `request ${i} (${JSON.stringify(ps[i].slice(0, 40))})`);
  }
  assert.equal((await alone.stop()).code, 0);
  assert.equal(new Set(concurrent).size, concurrent.length, 'the replies differ from each other');
});
