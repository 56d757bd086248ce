// Tool calls with the official openai client on tkv-test-23M, served with
// the real chat template of each tool-call family (TURBOKV_SHARED/
// templates): tool_choice "required" and a named function make the reply a
// call (the grammar), whose arguments validate against the tool's schema;
// the client's tool loop (call -> tool result -> next turn) renders the
// call and its result into the prompt; a streamed call is reassembled by
// the client's stream helper; under "none" the template still lists the
// tools (the prompt is auto's) and the reply is text.
import assert from 'node:assert/strict';
import { main, request, requireModel, requireTemplate, startServer } from './lib/harness.mjs';

const FAMILIES = [
  'Qwen-Qwen2.5-7B-Instruct',              // <tool_call> JSON (Hermes)
  'Qwen3.5-4B',                            // XML-style calls, reasoning opened by the prompt
  'meta-llama-Llama-3.2-3B-Instruct',      // {"name", "parameters"}
  'Mistral-Small-3.2-24B-Instruct-2506',   // [TOOL_CALLS]name[ARGS]{...}
  'openai-gpt-oss-120b',                   // harmony channels
  'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B',
  'google-gemma-4-31B-it',
  'ibm-granite-granite-4.0',
];

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', maxLength: 12 },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
      },
      required: ['city'],
      additionalProperties: false,
    },
  },
};
const search = {
  type: 'function',
  function: {
    name: 'search',
    description: 'Search the web',
    parameters: {
      type: 'object',
      properties: { query: { type: 'string', maxLength: 16 }, max_results: { type: 'integer' } },
      required: ['query', 'max_results'],
      additionalProperties: false,
    },
  },
};

function checkArguments(call, what) {
  const args = JSON.parse(call.function.arguments);
  assert.equal(typeof args, 'object', what);
  if (call.function.name === 'get_weather') {
    assert.equal(typeof args.city, 'string', what);
    assert.ok([...args.city].length <= 12, what);
    if ('unit' in args) assert.ok(['celsius', 'fahrenheit'].includes(args.unit), what);
    for (const k of Object.keys(args)) assert.ok(['city', 'unit'].includes(k), what);
  } else {
    assert.equal(call.function.name, 'search', what);
    assert.equal(typeof args.query, 'string', what);
    assert.ok(Number.isInteger(args.max_results), what);
  }
  assert.equal(call.type, 'function', what);
  assert.ok(typeof call.id === 'string' && call.id.length >= 9, what);
}

async function family(stem) {
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '-c', '2048', '--chat-template', requireTemplate(stem)]);
  try {
    const client = server.client();
    const messages = [{ role: 'user', content: "What's the weather in Paris?" }];
    const base = { model: 'm', messages, temperature: 0.8, max_tokens: 300 };

    // required: one call (parallel_tool_calls false), schema-valid.
    const r = await client.chat.completions.create({
      ...base, seed: 1, tools: [weather, search], tool_choice: 'required', parallel_tool_calls: false,
    });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', `${stem}: ${JSON.stringify(choice.message)}`);
    assert.equal(choice.message.tool_calls.length, 1, stem);
    checkArguments(choice.message.tool_calls[0], stem);

    // A named function.
    const named = await client.chat.completions.create({
      ...base, seed: 2, tools: [weather, search], tool_choice: { type: 'function', function: { name: 'search' } },
      parallel_tool_calls: false,
    });
    assert.equal(named.choices[0].finish_reason, 'tool_calls', stem);
    assert.equal(named.choices[0].message.tool_calls.length, 1, stem);
    for (const call of named.choices[0].message.tool_calls) {
      assert.equal(call.function.name, 'search', stem);
      checkArguments(call, stem);
    }

    // The tool loop: the call and its result go back; the template renders both.
    const history = [...messages, choice.message,
      { role: 'tool', tool_call_id: choice.message.tool_calls[0].id, content: '18 degrees Celsius, cloudy' }];
    const prompt = await request(server, 'POST', '/apply-template', { body: { messages: history, tools: [weather, search] } });
    assert.equal(prompt.status, 200, `${stem}: ${JSON.stringify(prompt.json)}`);
    assert.ok(prompt.json.prompt.includes('18 degrees Celsius, cloudy'), stem);
    assert.ok(prompt.json.prompt.includes(choice.message.tool_calls[0].function.name), stem);
    const next = await client.chat.completions.create({ ...base, messages: history, tools: [weather, search], seed: 3, max_tokens: 16 });
    assert.ok(['stop', 'length', 'tool_calls'].includes(next.choices[0].finish_reason), stem);
    assert.ok(next.usage.prompt_tokens > r.usage.prompt_tokens, stem);

    // Streamed: the client's helper joins the deltas into whole calls.
    const stream = client.beta.chat.completions.stream({
      ...base, seed: 4, tools: [weather, search], tool_choice: 'required', parallel_tool_calls: false,
    });
    const final = await stream.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'tool_calls', `${stem}: ${JSON.stringify(final.choices[0].message)}`);
    assert.equal(final.choices[0].message.tool_calls.length, 1, stem);
    checkArguments(final.choices[0].message.tool_calls[0], `${stem} (streamed)`);

    // Parallel calls: one or more, each whole one valid (a random model may
    // run on into max_tokens after its calls: the calls made are kept).
    const parallel = await client.chat.completions.create({ ...base, seed: 5, max_tokens: 400, tools: [weather, search], tool_choice: 'required' });
    assert.ok(parallel.choices[0].message.tool_calls.length >= 1, stem);
    for (const call of parallel.choices[0].message.tool_calls) checkArguments(call, `${stem} (parallel)`);

    // none: the template lists the tools as under auto (a closing turn
    // keeps the loop's cached prompt); the reply is text, never parsed.
    const none = await request(server, 'POST', '/apply-template', { body: { messages, tools: [weather], tool_choice: 'none' } });
    const auto = await request(server, 'POST', '/apply-template', { body: { messages, tools: [weather], tool_choice: 'auto' } });
    assert.equal(none.status, 200, stem);
    assert.equal(none.json.prompt, auto.json.prompt, stem);
    const text = await client.chat.completions.create({ ...base, seed: 6, max_tokens: 24, tools: [weather], tool_choice: 'none' });
    assert.equal(text.choices[0].message.tool_calls, undefined, stem);
  } finally {
    await server.stop();
  }
}

main(async () => {
  for (const stem of FAMILIES) await family(stem);
});
