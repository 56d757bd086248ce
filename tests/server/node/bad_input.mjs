// Bad input gets the right status and an OpenAI error object, while another
// stream keeps going: malformed JSON, wrong types, unknown and unsupported
// fields (a malformed tool), n = 2, penalties, a prompt over the context (400 naming
// both numbers), no or a wrong API key (401), a body over --max-body (413),
// unknown routes (404) and methods (405). /health needs no key, /metrics
// does. The stream started first ends normally afterwards.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { main, request, requireModel, startServer } from './lib/harness.mjs';

const KEY = 'sk-test-0123456789';

function assertError(r, status, { param, code, match } = {}) {
  const what = `${r.status} ${r.text.slice(0, 300)}`;
  assert.equal(r.status, status, what);
  assert.ok(r.json && r.json.error, `an error object: ${what}`);
  const e = r.json.error;
  assert.equal(typeof e.message, 'string', what);
  assert.equal(typeof e.type, 'string', what);
  assert.ok('param' in e && 'code' in e, what);
  if (param !== undefined) assert.equal(e.param, param, what);
  if (code !== undefined) assert.equal(e.code, code, what);
  if (match) assert.match(e.message, match, what);
}

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '-c', '1024', '--api-key', KEY, '--max-body', '1M', '--chat-template', 'chatml']);
  const client = server.client({ apiKey: KEY });
  const user = [{ role: 'user', content: 'Hello' }];

  // A long stream runs through everything below (most of the context: on
  // this tiny model a stream decodes about a second).
  const long = await client.completions.create({
    model: 'm', prompt: 'The kernel', max_tokens: 1000, temperature: 0, stream: true,
  });
  const it = long[Symbol.asyncIterator]();
  let longText = (await it.next()).value.choices[0].text;
  let longDone = false;
  let longFinish = null;
  const drain = (async () => {
    for (;;) {
      const { value, done } = await it.next();
      if (done) break;
      for (const c of value.choices) {
        longText += c.text;
        if (c.finish_reason) longFinish = c.finish_reason;
      }
    }
    longDone = true;
  })();

  const chat = (body, opts = {}) => request(server, 'POST', '/v1/chat/completions', { body, key: KEY, ...opts });
  const completion = (body) => request(server, 'POST', '/v1/completions', { body, key: KEY });

  assertError(await chat('{"model": "m", "messages": [', {}), 400, { code: 'invalid_json' });
  assertError(await chat('[1, 2]'), 400);
  assertError(await chat(''), 400);
  assertError(await chat({ messages: 'Hello' }), 400, { param: 'messages' });
  assertError(await chat({ messages: user, temperature: 'hot' }), 400, { param: 'temperature' });
  assertError(await chat({ messages: user, max_tokens: -3 }), 400, { param: 'max_tokens' });
  assertError(await chat({ messages: user, temperature: 7 }), 400, { param: 'temperature' });
  assertError(await chat({ messages: [{ role: 'user', content: 42 }] }), 400);
  assertError(await chat({ messages: [] }), 400, { param: 'messages' });
  assertError(await chat({ messages: user, frobnicate: true }), 400, { param: 'frobnicate', match: /frobnicate/ });
  assertError(await chat({ messages: user, tools: [{ type: 'function', function: { name: 'f g', parameters: {} } }] }),
              400, { param: 'tools[0].function.name', match: /valid function name/ });
  assertError(await chat({ messages: user, response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { allOf: [] } } } }),
              400, { param: 'response_format.json_schema.schema', match: /allOf/ });
  assertError(await chat({ messages: user, grammar: 'root ::= [' }), 400, { param: 'grammar', match: /line 1, column/ });
  assertError(await chat({ messages: user, n: 129 }), 400, { param: 'n' });
  assertError(await chat({ messages: user, presence_penalty: 2.5 }), 400, { param: 'presence_penalty' });
  assertError(await completion({ prompt: [1, 2, 99999999] }), 400, { param: 'prompt' });
  assertError(await completion({ prompt: 'x', stream_options: { include_usage: true } }), 400);

  // A prompt over the context: 400 with both numbers, for text and for ids.
  const over = await completion({ prompt: 'pages of metadata and data blocks, '.repeat(200), max_tokens: 4 });
  assertError(over, 400, { param: 'prompt', code: 'context_length_exceeded', match: /1024/ });
  const n = Number(/resulted in (\d+) tokens/.exec(over.json.error.message)?.[1]);
  assert.ok(n > 1024, over.json.error.message);
  assertError(await completion({ prompt: Array(1100).fill(300) }), 400,
              { param: 'prompt', code: 'context_length_exceeded', match: /1024 tokens.*1100 tokens/ });
  assertError(await completion({ prompt: Array(1024).fill(300) }), 400, { code: 'context_length_exceeded' });

  // The key: none, wrong, wrong scheme; the official client's error class.
  assertError(await request(server, 'POST', '/v1/chat/completions', { body: { messages: user } }), 401);
  assertError(await chat({ messages: user }, { key: 'sk-wrong' }), 401);
  assertError(await chat({ messages: user }, { key: KEY.slice(0, -1) }), 401);
  assertError(await request(server, 'POST', '/v1/chat/completions', { body: { messages: user }, headers: { authorization: `Basic ${KEY}` } }), 401);
  await assert.rejects(
    server.client({ apiKey: 'sk-wrong' }).chat.completions.create({ model: 'm', messages: user }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  assertError(await request(server, 'GET', '/metrics'), 401);
  const metrics = await request(server, 'GET', '/metrics', { key: KEY });
  assert.equal(metrics.status, 200);
  assert.match(metrics.text, /turbokv_requests_total\{endpoint="\/v1\/chat\/completions",code="400"\}/);
  const health = await request(server, 'GET', '/health');
  assert.equal(health.status, 200);

  // A body over --max-body (1 MiB).
  const huge = JSON.stringify({ model: 'm', prompt: 'x'.repeat(2 << 20) });
  assertError(await request(server, 'POST', '/v1/completions', { body: huge, key: KEY }), 413);

  // Routes and methods.
  assertError(await request(server, 'GET', '/v1/nope', { key: KEY }), 404);
  assertError(await request(server, 'POST', '/v1/embeddings', { body: {}, key: KEY }), 404);
  const wrongMethod = await request(server, 'GET', '/v1/chat/completions', { key: KEY });
  assertError(wrongMethod, 405);
  assert.equal(wrongMethod.headers.get('allow'), 'POST');
  assertError(await request(server, 'DELETE', '/v1/models', { key: KEY }), 405);

  // Everything above was answered while the long stream was running.
  assert.equal(longDone, false, 'the long stream was still running');
  await drain;
  assert.ok(longFinish === 'length' || longFinish === 'stop', `long stream finish: ${longFinish}`);
  assert.ok(longText.length > 0);

  // max_tokens larger than the room left is capped, not refused: a prompt
  // of 1010 ids leaves 14 tokens.
  const capped = await completion({ prompt: Array(1010).fill(300), max_tokens: 5000, temperature: 0 });
  assert.equal(capped.status, 200, capped.text);
  const u = capped.json.usage;
  assert.equal(u.prompt_tokens, 1010);
  assert.ok(u.completion_tokens <= 14, JSON.stringify(u));
  if (capped.json.choices[0].finish_reason === 'length') assert.equal(u.completion_tokens, 14);

  // And the server still serves.
  const ok = await client.chat.completions.create({ model: 'm', messages: user, max_tokens: 3 });
  assert.equal(ok.object, 'chat.completion');
  assert.equal((await server.stop()).code, 0);
});
