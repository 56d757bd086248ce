// A client that goes away cancels its generation: a stream aborted after its
// first chunks, and a whole-body request whose connection is closed while
// it generates, both free their sequence at once (sequences_active drops to
// 0 long before max_tokens could have been generated); the server goes on.
import assert from 'node:assert/strict';
import { main, metric, request, requireModel, startServer } from './lib/harness.mjs';

async function waitIdle(server, what) {
  const start = Date.now();
  for (;;) {
    const m = await request(server, 'GET', '/metrics');
    if (metric(m.text, 'turbokv_sequences_active') === 0) return m.text;
    if (Date.now() - start > 5000) throw new Error(`${what}: a sequence is still active after 5 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '-c', '4096']);
  const client = server.client();
  const MAX = 3000;  // ~20 s of decoding on two cores: far longer than the waits below

  // Streamed: abort after three chunks.
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model: 'm', prompt: 'The kernel', max_tokens: MAX, temperature: 0, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  try {
    // Out of the loop at once: events already read past the third would
    // still be handed out after the abort (fewer than 3: the stream ended).
    for await (const _ of stream) {
      if (++chunks === 3) {
        controller.abort();
        break;
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError' && !(e instanceof Error && /abort/i.test(e.message))) throw e;
  }
  assert.equal(chunks, 3);
  let text = await waitIdle(server, 'aborted stream');
  const generated = metric(text, 'turbokv_generation_tokens_total');
  assert.ok(generated < 500, `the aborted stream went on to ${generated} tokens`);

  // Whole body: the connection closes while the server generates.
  const abort = new AbortController();
  const pending = fetch(`${server.baseURL}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', prompt: 'The file system', max_tokens: MAX, temperature: 0 }),
    signal: abort.signal,
  });
  for (;;) {  // until it is decoding
    const m = await request(server, 'GET', '/metrics');
    if (metric(m.text, 'turbokv_sequences_active') === 1) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 300));
  // (Its headers may already be out: the status is sent with the first token.)
  // Counted from the abort, not from the start: how many tokens 300 ms are
  // depends on the machine, how many follow the abort on noticing it.
  const atAbort = metric((await request(server, 'GET', '/metrics')).text,
                         'turbokv_generation_tokens_total');
  abort.abort();
  await assert.rejects(pending.then((res) => res.text()));
  text = await waitIdle(server, 'closed whole-body request');
  const total = metric(text, 'turbokv_generation_tokens_total');
  assert.ok(total < atAbort + 500, `the closed request went on for ${total - atAbort} tokens`);

  const ok = await client.completions.create({ model: 'm', prompt: 'The', max_tokens: 3 });
  assert.equal(ok.usage.completion_tokens, 3);
  assert.equal((await server.stop()).code, 0);
});
