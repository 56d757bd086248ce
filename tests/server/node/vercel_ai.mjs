// The Vercel AI SDK (ai + @ai-sdk/openai) against a live server on
// tkv-test-23M: generateText and streamText through the OpenAI provider,
// with presencePenalty and frequencyPenalty reaching the server.
import assert from 'node:assert/strict';
import { main, requireModel, requirePackage, startServer } from './lib/harness.mjs';

main(async () => {
  const { generateText, streamText } = await requirePackage('ai');
  const { createOpenAI } = await requirePackage('@ai-sdk/openai');
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '-c', '1024', '--api-key', 'sk-local', '--chat-template', 'chatml']);
  const bodies = [];
  const provider = createOpenAI({
    baseURL: `${server.baseURL}/v1`,
    apiKey: 'sk-local',
    compatibility: 'compatible',
    fetch: async (url, init) => {
      bodies.push(JSON.parse(init.body));
      return fetch(url, init);
    },
  });
  const settings = { prompt: 'Tell me about disks.', maxTokens: 12, seed: 4, temperature: 1, maxRetries: 0 };
  const plain = await generateText({ model: provider('tkv-test-23M'), ...settings });
  const penalized = await generateText({
    model: provider('tkv-test-23M'), ...settings, presencePenalty: 1.5, frequencyPenalty: 1.0,
  });
  assert.equal(bodies[1].presence_penalty, 1.5);
  assert.equal(bodies[1].frequency_penalty, 1.0);
  assert.ok(penalized.text.length > 0);
  assert.notEqual(penalized.text, plain.text);
  assert.ok(penalized.usage.promptTokens > 0);
  assert.equal(penalized.usage.completionTokens, 12);
  assert.equal(penalized.finishReason, 'length');

  const streamed = streamText({
    model: provider('tkv-test-23M'), ...settings, presencePenalty: 1.5, frequencyPenalty: 1.0,
  });
  let text = '';
  for await (const piece of streamed.textStream) text += piece;
  assert.equal(text, penalized.text);
  assert.equal((await server.stop()).code, 0);
});
