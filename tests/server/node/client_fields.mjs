// The official client's request fields and routes beyond plain chat and
// completions, against a live server on tkv-test-23M: presence and
// frequency penalties, logit_bias, n choices whole and streamed,
// models.retrieve, responses.create whole and streamed, and a long prompt's
// pages held once under n: 4 (/metrics).
import assert from 'node:assert/strict';
import { filler, main, metric, request, requireModel, startServer } from './lib/harness.mjs';

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '-c', '4096', '--chat-template', 'chatml']);
  const client = server.client();
  const prompt = 'The kernel scheduler decides';

  // Penalties: accepted, seeded replies reproducible, and they change the draw.
  const sampled = (extra) =>
    client.completions.create({ model: 'm', prompt, max_tokens: 24, seed: 3, ...extra });
  const plain = (await sampled({})).choices[0].text;
  const penalized = await sampled({ presence_penalty: 1.5, frequency_penalty: 1.5 });
  assert.equal(penalized.choices[0].text, (await sampled({ presence_penalty: 1.5, frequency_penalty: 1.5 })).choices[0].text);
  assert.notEqual(penalized.choices[0].text, plain);

  // logit_bias: +100 on one token makes a greedy reply that token only.
  const biased = await client.completions.create({
    model: 'm', prompt, max_tokens: 5, temperature: 0, logprobs: 0, logit_bias: { 1000: 100 },
  });
  const tokens = biased.choices[0].logprobs.tokens;
  assert.equal(tokens.length, 5);
  assert.ok(tokens.every((t) => t === tokens[0]), JSON.stringify(tokens));
  const chatBiased = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0,
    logprobs: true, logit_bias: { 1000: 100 },
  });
  assert.equal(chatBiased.choices[0].logprobs.content[0].token, tokens[0]);

  // n choices: indexed 0..n-1, choice i the reply of seed + i, the prompt counted once.
  const n3 = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content: 'Tell me about disks.' }], max_tokens: 10, seed: 9, n: 3,
  });
  assert.deepEqual(n3.choices.map((c) => c.index), [0, 1, 2]);
  const one = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content: 'Tell me about disks.' }], max_tokens: 10, seed: 11,
  });
  assert.equal(n3.choices[2].message.content, one.choices[0].message.content);
  assert.equal(n3.usage.prompt_tokens, one.usage.prompt_tokens);
  assert.equal(n3.usage.completion_tokens, 30);
  const texts = ['', '', ''];
  const finished = [0, 0, 0];
  for await (const chunk of await client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content: 'Tell me about disks.' }], max_tokens: 10, seed: 9, n: 3,
    stream: true,
  })) {
    for (const c of chunk.choices) {
      texts[c.index] += c.delta.content ?? '';
      if (c.finish_reason) finished[c.index]++;
    }
  }
  assert.deepEqual(texts, n3.choices.map((c) => c.message.content));
  assert.deepEqual(finished, [1, 1, 1]);

  // models.retrieve: the served model, or a 404.
  const retrieved = await client.models.retrieve('tkv-test-23M');
  assert.equal(retrieved.id, 'tkv-test-23M');
  assert.equal(retrieved.object, 'model');
  await assert.rejects(client.models.retrieve('gpt-4o'), (err) => err.status === 404);

  // responses.create: the chat reply as a Response, whole and streamed.
  const chat = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }],
    max_tokens: 8, temperature: 0,
  });
  const response = await client.responses.create({
    model: 'm', instructions: 'Be brief.', input: 'Hello', max_output_tokens: 8, temperature: 0,
  });
  assert.equal(response.object, 'response');
  assert.equal(response.output_text, chat.choices[0].message.content);
  assert.equal(response.usage.input_tokens, chat.usage.prompt_tokens);
  const types = [];
  let deltas = '';
  for await (const event of await client.responses.create({
    model: 'm', instructions: 'Be brief.', input: [{ role: 'user', content: 'Hello' }], max_output_tokens: 8,
    temperature: 0, stream: true,
  })) {
    if (types.at(-1) !== event.type) types.push(event.type);
    if (event.type === 'response.output_text.delta') deltas += event.delta;
  }
  assert.equal(deltas, response.output_text);
  assert.equal(types[0], 'response.created');
  assert.ok(types.includes('response.output_text.delta'), types.join(' '));
  assert.match(types.at(-1), /^response\.(completed|incomplete)$/);

  // n: 4 on a long prompt: its pages are held once. Mid-stream, the pool
  // grows by far less than four copies of the prompt would take.
  const midStream = async (text, n) => {
    const stream = await client.completions.create({
      model: 'm', prompt: text, max_tokens: 64, n, stream: true, seed: 1,
    });
    // The gauges are published after each step: the peaks over several
    // reads while the choices decode.
    const figures = { used: 0, shared: 0 };
    let reads = 0;
    for await (const chunk of stream) {
      if (reads < 6 && chunk.choices.some((c) => c.text)) {
        const m = (await request(server, 'GET', '/metrics')).text;
        figures.used = Math.max(figures.used, metric(m, 'turbokv_kv_cache_used_bytes'));
        figures.shared = Math.max(figures.shared, metric(m, 'turbokv_kv_cache_shared_bytes'));
        reads++;
      }
    }
    return figures;
  };
  const idle = () => request(server, 'GET', '/metrics').then((r) => metric(r.text, 'turbokv_kv_cache_used_bytes'));
  // Prompt tokens accepted, and of them those run through the model.
  const prefillCounts = async () => {
    const m = (await request(server, 'GET', '/metrics')).text;
    return {
      prompt: metric(m, 'turbokv_prompt_tokens_total') - metric(m, 'turbokv_prefix_cache_reused_tokens_total'),
      prefilled: metric(m, 'turbokv_prefill_tokens_total'),
    };
  };
  const before1 = await idle();
  const single = await midStream(await filler(9000, 100000), 1);
  const before4 = await idle();
  const counts4 = await prefillCounts();
  const four = await midStream(await filler(9000, 200000), 4);
  const after4 = await prefillCounts();
  const grew1 = single.used - before1, grew4 = four.used - before4;
  assert.ok(four.shared > 0, `shared bytes under n: 4: ${four.shared}`);
  assert.ok(grew4 < 1.6 * grew1, `n: 4 grew the pool by ${grew4} bytes, one choice by ${grew1}`);
  // The prompt of four choices is prefilled once: the model ran each of its
  // tokens (not reused from the cache) once.
  const prompt4 = after4.prompt - counts4.prompt;
  assert.ok(prompt4 > 2000, `prompt tokens: ${prompt4}`);
  assert.equal(after4.prefilled - counts4.prefilled, prompt4);

  assert.equal((await server.stop()).code, 0);
});
