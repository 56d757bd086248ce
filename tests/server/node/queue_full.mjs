// Past --parallel, requests wait in a bounded queue (--queue); beyond it the
// answer is 503 with Retry-After, and the admitted and queued requests are
// served in full.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { main, requireModel, startServer } from './lib/harness.mjs';

async function collect(stream) {
  let finish = null;
  let n = 0;
  for await (const chunk of stream) for (const c of chunk.choices) { n++; if (c.finish_reason) finish = c.finish_reason; }
  return { finish, n };
}

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '--parallel', '1', '--queue', '1']);
  const client = server.client();
  const params = { model: 'm', prompt: 'The kernel', max_tokens: 200, temperature: 0, stream: true };
  // A stream's headers come back as soon as it is admitted or queued.
  const running = await client.completions.create(params);
  const queued = await client.completions.create(params);
  const refused = await client.completions.create(params).then(
    () => null,
    (e) => e);
  assert.ok(refused instanceof OpenAI.APIError, `a third request is refused: ${refused}`);
  assert.equal(refused.status, 503);
  assert.ok(Number(refused.headers['retry-after']) >= 1, `Retry-After: ${refused.headers['retry-after']}`);
  assert.equal(refused.error?.type, 'server_error');
  const [a, b] = await Promise.all([collect(running), collect(queued)]);
  assert.ok(a.finish && b.finish, `both finished: ${a.finish} ${b.finish}`);
  assert.equal((await server.stop()).code, 0);
});
