// Structured output with the official client: beta.chat.completions.parse
// with a strict json_schema response_format (what zodResponseFormat
// produces, written out: zod is not a dependency), json_object, and
// llama-server's grammar field, on tkv-test-23M.
import assert from 'node:assert/strict';
import { main, requireModel, startServer } from './lib/harness.mjs';

const schema = {
  type: 'object',
  properties: {
    title: { type: 'string', maxLength: 24 },
    year: { type: 'integer' },
    license: { enum: ['GPL', 'BSD', 'MIT'] },
    tags: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 3 },
    stable: { type: 'boolean' },
  },
  required: ['title', 'year', 'license', 'tags', 'stable'],
  additionalProperties: false,
};

function checkProject(choice) {
  assert.equal(choice.finish_reason, 'stop', choice.message.content);
  const p = choice.message.parsed;
  assert.ok(p && typeof p === 'object', choice.message.content);
  assert.deepEqual(Object.keys(p), ['title', 'year', 'license', 'tags', 'stable']);
  assert.equal(typeof p.title, 'string');
  assert.ok([...p.title].length <= 24, p.title);
  assert.ok(Number.isInteger(p.year), String(p.year));
  assert.ok(['GPL', 'BSD', 'MIT'].includes(p.license), p.license);
  assert.ok(Array.isArray(p.tags) && p.tags.length <= 3);
  for (const t of p.tags) assert.ok(typeof t === 'string' && [...t].length <= 8, t);
  assert.equal(typeof p.stable, 'boolean');
}

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '-c', '1024', '--chat-template', 'chatml']);
  const client = server.client();
  const messages = [{ role: 'user', content: 'Describe the Linux kernel as JSON.' }];

  for (const seed of [1, 2]) {
    const r = await client.beta.chat.completions.parse({
      model: 'tkv-test-23M', messages, seed, temperature: 0.8, max_tokens: 400,
      response_format: { type: 'json_schema', json_schema: { name: 'project', strict: true, schema } },
    });
    checkProject(r.choices[0]);
  }

  // n: 2 with a presence penalty: each choice follows the schema with its
  // own grammar state.
  const two = await client.beta.chat.completions.parse({
    model: 'tkv-test-23M', messages, seed: 3, temperature: 0.8, max_tokens: 400, n: 2,
    presence_penalty: 0.5,
    response_format: { type: 'json_schema', json_schema: { name: 'project', strict: true, schema } },
  });
  assert.equal(two.choices.length, 2);
  for (const choice of two.choices) checkProject(choice);

  // json_object: the text starts an object and, when it ends, is one.
  const obj = await client.chat.completions.create({
    model: 'tkv-test-23M', messages, temperature: 0, max_tokens: 120,
    response_format: { type: 'json_object' },
  });
  const text = obj.choices[0].message.content;
  assert.ok(text.startsWith('{'), text);
  if (obj.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(text), 'object');

  // llama-server's GBNF field (an extra body field to the client).
  const g = await client.completions.create({
    model: 'tkv-test-23M', prompt: 'The answer is', max_tokens: 20, temperature: 0.7, seed: 5,
    grammar: 'root ::= " " ("yes" | "no") "."',
  });
  assert.match(g.choices[0].text, /^ (yes|no)\.$/);
  assert.equal(g.choices[0].finish_reason, 'stop');

  // An unsupported schema keyword: a 400 naming it.
  await assert.rejects(
    client.chat.completions.create({
      model: 'tkv-test-23M', messages,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } },
    }),
    (e) => e.status === 400 && /format 'email'/.test(e.message));
  await server.stop();
});
