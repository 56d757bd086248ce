// The official client's calls against a live server on tkv-test-23M:
// models.list, completions and chat completions, streamed and not, with
// usage and finish_reason as the OpenAI API defines them; /health.
import assert from 'node:assert/strict';
import { main, requireModel, startServer, streamTimed, tokenize, request } from './lib/harness.mjs';

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '-c', '1024', '--chat-template', 'chatml']);
  const client = server.client();

  const health = await request(server, 'GET', '/health');
  assert.equal(health.status, 200);
  assert.deepEqual(health.json, { status: 'ok' });

  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, 'tkv-test-23M');
  assert.equal(models.data[0].object, 'model');

  // Completions, whole: max_tokens reached -> "length"; the prompt is BOS
  // plus the text's tokens, as `turbokv run` feeds it.
  const prompt = 'The kernel scheduler decides';
  const promptTokens = 1 + (await tokenize(model, prompt)).length;
  const whole = await client.completions.create({
    model: 'tkv-test-23M', prompt, max_tokens: 12, temperature: 0,
  });
  assert.equal(whole.object, 'text_completion');
  assert.match(whole.id, /^cmpl-/);
  assert.equal(whole.model, 'tkv-test-23M');
  assert.equal(whole.choices.length, 1);
  assert.equal(whole.choices[0].index, 0);
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.prompt_tokens, promptTokens);
  assert.equal(whole.usage.completion_tokens, 12);
  assert.equal(whole.usage.total_tokens, promptTokens + 12);
  assert.ok(whole.choices[0].text.length > 0);

  // The same request streamed: the same text (greedy), the finish_reason on
  // the last choice chunk, the usage in a chunk of its own.
  const streamed = await streamTimed(client, 'completions', {
    model: 'tkv-test-23M', prompt, max_tokens: 12, temperature: 0,
  });
  assert.equal(streamed.text, whole.choices[0].text);
  assert.equal(streamed.finish, 'length');
  assert.equal(streamed.usage.prompt_tokens, promptTokens);
  assert.equal(streamed.usage.completion_tokens, 12);

  // A stop string ends the text before it, with "stop".
  const stop = whole.choices[0].text.slice(4, 8);
  assert.ok(stop.trim().length > 0, `stop string from ${JSON.stringify(whole.choices[0].text)}`);
  const stopped = await client.completions.create({
    model: 'tkv-test-23M', prompt, max_tokens: 12, temperature: 0, stop: [stop],
  });
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  assert.equal(stopped.choices[0].text, whole.choices[0].text.slice(0, whole.choices[0].text.indexOf(stop)));
  assert.ok(stopped.usage.completion_tokens < 12);

  // Chat, whole and streamed. This model has no chat template: chatml. The
  // prompt is shorter than a page (64 tokens), so the second request is not
  // served from the prefix cache and is computed exactly as the first.
  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'What does the scheduler do?' },
  ];
  const rendered =
    '<|im_start|>system\nBe brief.<|im_end|>\n' +
    '<|im_start|>user\nWhat does the scheduler do?<|im_end|>\n<|im_start|>assistant\n';
  const chatPromptTokens = 1 + (await tokenize(model, rendered)).length;
  const chat = await client.chat.completions.create({
    model: 'tkv-test-23M', messages, max_tokens: 10, temperature: 0,
  });
  assert.equal(chat.object, 'chat.completion');
  assert.match(chat.id, /^chatcmpl-/);
  assert.equal(chat.choices[0].message.role, 'assistant');
  assert.equal(typeof chat.choices[0].message.content, 'string');
  assert.equal(chat.usage.prompt_tokens, chatPromptTokens);
  assert.ok(chatPromptTokens < 64, `chat prompt of ${chatPromptTokens} tokens`);
  const chatFinish = chat.choices[0].finish_reason;
  assert.ok(['stop', 'length'].includes(chatFinish), chatFinish);
  if (chatFinish === 'length') assert.equal(chat.usage.completion_tokens, 10);
  assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);

  const chatStream = await client.chat.completions.create({
    model: 'tkv-test-23M', messages, max_tokens: 10, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let first = null;
  let content = '';
  let finish = null;
  let usage = null;
  for await (const chunk of chatStream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (first === null) first = chunk;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(first.choices[0].delta.role, 'assistant');
  assert.equal(content, chat.choices[0].message.content);
  assert.equal(finish, chatFinish);
  // The same short prompt again is reused whole from the prefix cache.
  assert.deepEqual({ ...usage, prompt_tokens_details: null }, { ...chat.usage, prompt_tokens_details: null });
  assert.equal(usage.prompt_tokens_details.cached_tokens, chat.usage.prompt_tokens);

  // Logprobs: one entry per generated token, top_logprobs alternatives.
  const lp = await client.chat.completions.create({
    model: 'tkv-test-23M', messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  const entries = lp.choices[0].logprobs.content;
  assert.equal(entries.length, lp.usage.completion_tokens);
  for (const e of entries) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(e.logprob >= e.top_logprobs[0].logprob - 1e-6);
  }

  const exit = await server.stop();
  assert.equal(exit.code, 0, `serve exit after SIGTERM: ${JSON.stringify(exit)}`);
});
