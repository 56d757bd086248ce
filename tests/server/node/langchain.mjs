// LangChain's OpenAI classes (@langchain/openai) against a live server on
// tkv-test-23M: the completions LLM's generate() with two prompts (one
// request, prompts as an array) and ChatOpenAI over the Responses API
// (useResponsesApi).
import assert from 'node:assert/strict';
import { main, requireModel, requirePackage, startServer } from './lib/harness.mjs';

main(async () => {
  const { OpenAI, ChatOpenAI } = await requirePackage('@langchain/openai');
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '-c', '1024', '--chat-template', 'chatml']);
  const configuration = { baseURL: `${server.baseURL}/v1` };
  const common = { apiKey: 'unused', configuration, maxRetries: 0, temperature: 0, model: 'tkv-test-23M' };

  const llm = new OpenAI({ ...common, maxTokens: 8 });
  const prompts = ['The kernel scheduler decides', 'A file system keeps'];
  const result = await llm.generate(prompts);
  assert.equal(result.generations.length, 2);
  const client = server.client();
  for (let i = 0; i < 2; i++) {
    const alone = await client.completions.create({ model: 'm', prompt: prompts[i], max_tokens: 8, temperature: 0 });
    assert.equal(result.generations[i][0].text, alone.choices[0].text, `prompt ${i}`);
  }

  const chat = new ChatOpenAI({ ...common, maxTokens: 8, useResponsesApi: true });
  const reply = await chat.invoke([['system', 'Be brief.'], ['human', 'Hello']]);
  const direct = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }],
    max_tokens: 8, temperature: 0,
  });
  const text = typeof reply.content === 'string' ? reply.content : reply.content.map((p) => p.text ?? '').join('');
  assert.equal(text, direct.choices[0].message.content);
  let streamed = '';
  for await (const chunk of await chat.stream([['system', 'Be brief.'], ['human', 'Hello']])) {
    streamed += typeof chunk.content === 'string' ? chunk.content : chunk.content.map((p) => p.text ?? '').join('');
  }
  assert.equal(streamed, text);
  assert.equal((await server.stop()).code, 0);
});
