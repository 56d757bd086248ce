// The agent paths of the three real clients on tkv-test-23M served with
// Qwen2.5's chat template (Hermes <tool_call> syntax): the Vercel AI SDK's
// generateText with a tool it executes (maxSteps 2: call, result, answer)
// and generateObject; LangChain's bindTools and withStructuredOutput; the
// openai client's zod helpers (zodFunction tools, zodResponseFormat with
// chat.completions.parse). On random weights the grammar makes the calls and
// objects well-formed: each is validated against its schema. The same
// through the Responses API (the openai client's responses.create and
// LangChain's useResponsesApi).
import assert from 'node:assert/strict';
import { main, requireModel, requirePackage, requireTemplate, startServer } from './lib/harness.mjs';

const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const projectSchema = {
  type: 'object',
  properties: { title: { type: 'string', maxLength: 20 }, year: { type: 'integer' }, stable: { type: 'boolean' } },
  required: ['title', 'year', 'stable'],
  additionalProperties: false,
};

function checkWeather(args, what) {
  assert.equal(typeof args.city, 'string', what);
  assert.ok([...args.city].length <= 12, what);
  assert.ok(['celsius', 'fahrenheit'].includes(args.unit), what);
}

function checkProject(p, what) {
  assert.deepEqual(Object.keys(p).sort(), ['stable', 'title', 'year'], what);
  assert.ok(typeof p.title === 'string' && [...p.title].length <= 20, what);
  assert.ok(Number.isInteger(p.year), what);
  assert.equal(typeof p.stable, 'boolean', what);
}

async function vercel(server) {
  const { generateText, generateObject, jsonSchema, tool } = await requirePackage('ai');
  const { createOpenAI } = await requirePackage('@ai-sdk/openai');
  const provider = createOpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'unused', compatibility: 'compatible' });
  const executed = [];
  const result = await generateText({
    model: provider('m', { parallelToolCalls: false }), prompt: 'Weather in Oslo?', seed: 1, temperature: 0.8, maxTokens: 200, maxRetries: 0,
    maxSteps: 2, toolChoice: 'required',
    tools: {
      get_weather: tool({
        description: 'Current weather in a city',
        parameters: jsonSchema(weatherSchema),
        execute: async (args) => { executed.push(args); return '7 degrees, light rain'; },
      }),
    },
  });
  assert.ok(executed.length >= 1, `the SDK executed the tool: ${JSON.stringify(result.steps.map((s) => [s.finishReason, s.text, s.toolCalls]))}`);
  for (const args of executed) checkWeather(args, 'vercel tool call');
  assert.equal(result.steps[0].finishReason, 'tool-calls');
  assert.equal(result.steps.length, 2);

  const object = await generateObject({
    model: provider('m'), prompt: 'Describe a project as JSON.', schema: jsonSchema(projectSchema),
    seed: 2, temperature: 0.8, maxTokens: 120, maxRetries: 0,
  });
  checkProject(object.object, 'vercel generateObject');
}

async function langchain(server) {
  const { ChatOpenAI } = await requirePackage('@langchain/openai');
  const chat = new ChatOpenAI({
    apiKey: 'unused', configuration: { baseURL: `${server.baseURL}/v1` }, maxRetries: 0,
    model: 'm', temperature: 0.8, maxTokens: 120,
  });
  const weatherTool = { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city', parameters: weatherSchema } };
  const bound = chat.bindTools([weatherTool], { tool_choice: 'required', parallel_tool_calls: false });
  const msg = await bound.invoke([['human', 'Weather in Rome?']], { seed: 3 });
  assert.ok(msg.tool_calls.length >= 1, JSON.stringify(msg));
  for (const call of msg.tool_calls) {
    assert.equal(call.name, 'get_weather');
    checkWeather(call.args, 'langchain bindTools');
  }
  for (const method of ['jsonSchema', 'functionCalling']) {
    const structured = chat.withStructuredOutput(projectSchema, { name: 'project', method });
    const p = await structured.invoke([['human', 'Describe a project as JSON.']], { seed: 4 });
    checkProject(p, `langchain withStructuredOutput ${method}`);
  }
  // json_object mode bounds the output's form, not its length: this test
  // model's free object may run past maxTokens (its sampled path differs
  // between SIMD targets), and then the reply must say so. A finished reply
  // parses as an object.
  const jsonMode = chat.withStructuredOutput(projectSchema, { name: 'project', method: 'jsonMode', includeRaw: true });
  const j = await jsonMode.invoke([['human', 'Describe a project as JSON.']], { seed: 4 });
  const finish = j.raw.response_metadata.finish_reason;
  assert.ok(String(j.raw.content).startsWith('{'), JSON.stringify(j.raw.content));
  if (finish === 'stop') assert.ok(j.parsed && typeof j.parsed === 'object', JSON.stringify(j.raw.content));
  else assert.equal(finish, 'length', JSON.stringify(j.raw));
}

async function openaiZod(server) {
  const { z } = await requirePackage('zod');
  const { zodFunction, zodResponseFormat } = await requirePackage('openai/helpers/zod');
  const client = server.client();
  const Weather = z.object({ city: z.string().max(12), unit: z.enum(['celsius', 'fahrenheit']) });
  const r = await client.beta.chat.completions.parse({
    model: 'm', messages: [{ role: 'user', content: 'Weather in Lima?' }], seed: 5, temperature: 0.8, max_tokens: 80,
    tools: [zodFunction({ name: 'get_weather', parameters: Weather })], tool_choice: 'required',
  });
  const call = r.choices[0].message.tool_calls[0];
  checkWeather(call.function.parsed_arguments, 'openai zodFunction');
  const Project = z.object({ title: z.string().max(20), year: z.number().int(), stable: z.boolean() });
  const p = await client.beta.chat.completions.parse({
    model: 'm', messages: [{ role: 'user', content: 'Describe a project.' }], seed: 6, temperature: 0.8, max_tokens: 120,
    response_format: zodResponseFormat(Project, 'project'),
  });
  checkProject(p.choices[0].message.parsed, 'openai zodResponseFormat');
}

// The Responses API: function tools in its flat form, the call as a
// function_call output item, the result sent back as function_call_output;
// streamed, the call's events; LangChain's ChatOpenAI over it with bindTools.
async function responses(server) {
  const client = server.client();
  const tool = { type: 'function', name: 'get_weather', description: 'Current weather in a city', parameters: weatherSchema, strict: true };
  const r = await client.responses.create({
    model: 'm', input: 'Weather in Kyiv?', tools: [tool], tool_choice: 'required', parallel_tool_calls: false,
    max_output_tokens: 120, temperature: 0.8, seed: 7,
  });
  const calls = r.output.filter((item) => item.type === 'function_call');
  assert.equal(calls.length, 1, JSON.stringify(r.output));
  assert.equal(calls[0].name, 'get_weather');
  checkWeather(JSON.parse(calls[0].arguments), 'responses function_call');
  const next = await client.responses.create({
    model: 'm', tools: [tool], max_output_tokens: 8, temperature: 0,
    input: [{ role: 'user', content: 'Weather in Kyiv?' }, calls[0],
      { type: 'function_call_output', call_id: calls[0].call_id, output: '3 degrees, snow' }],
  });
  assert.ok(next.usage.input_tokens > r.usage.input_tokens);
  let done = null;
  for await (const event of await client.responses.create({
    model: 'm', input: 'Weather in Kyiv?', tools: [tool], tool_choice: { type: 'function', name: 'get_weather' },
    parallel_tool_calls: false, max_output_tokens: 120, temperature: 0.8, seed: 8, stream: true,
  })) {
    if (event.type === 'response.function_call_arguments.done') done = event.arguments;
  }
  assert.ok(done !== null, 'a streamed function call');
  checkWeather(JSON.parse(done), 'responses streamed');

  const { ChatOpenAI } = await requirePackage('@langchain/openai');
  // This LangChain version leaves bindTools' tool_choice out of Responses
  // requests: modelKwargs puts it in.
  const chat = new ChatOpenAI({
    apiKey: 'unused', configuration: { baseURL: `${server.baseURL}/v1` }, maxRetries: 0,
    model: 'm', temperature: 0.8, maxTokens: 120, useResponsesApi: true, modelKwargs: { tool_choice: 'required' },
  });
  const bound = chat.bindTools([{ type: 'function', function: { name: 'get_weather', description: 'Current weather in a city', parameters: weatherSchema } }],
    { tool_choice: 'required', parallel_tool_calls: false });
  const msg = await bound.invoke([['human', 'Weather in Rome?']], { seed: 9 });
  assert.equal(msg.tool_calls.length, 1, JSON.stringify(msg));
  checkWeather(msg.tool_calls[0].args, 'langchain responses bindTools');
}

// Anthropic's Messages API (sent as a coding agent's client sends it): a
// custom tool with tool_choice "any" gives a tool_use block whose input
// follows the schema and stop_reason "tool_use"; its tool_result goes back;
// streamed, the call is a tool_use block with its input_json_delta.
async function messages(server) {
  const post = (body) => fetch(`${server.baseURL}/v1/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'unused', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
  });
  const tools = [{ name: 'get_weather', description: 'Current weather in a city', input_schema: weatherSchema }];
  const base = { model: 'm', max_tokens: 120, temperature: 0.8, tools, messages: [{ role: 'user', content: 'Weather in Bern?' }] };
  const m = await (await post({ ...base, seed: 10, tool_choice: { type: 'any', disable_parallel_tool_use: true } })).json();
  assert.equal(m.stop_reason, 'tool_use', JSON.stringify(m));
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  checkWeather(use.input, 'messages tool_use');
  const next = await post({ ...base, max_tokens: 8, messages: [...base.messages, { role: 'assistant', content: m.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '12 degrees' }, { type: 'text', text: 'And tomorrow?' }] }] });
  assert.equal(next.status, 200, await next.text());
  const streamed = await post({ ...base, seed: 11, stream: true, tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } });
  const text = await streamed.text();
  const events = text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
  const start = events.find((e) => e.type === 'content_block_start' && e.content_block.type === 'tool_use');
  assert.ok(start, text);
  const json = events.filter((e) => e.type === 'content_block_delta' && e.index === start.index).map((e) => e.delta.partial_json).join('');
  checkWeather(JSON.parse(json), 'messages streamed');
  assert.equal(events.find((e) => e.type === 'message_delta').delta.stop_reason, 'tool_use');
}

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const server = await startServer(model, ['-t', '2', '-c', '2048', '--chat-template', requireTemplate('Qwen-Qwen2.5-7B-Instruct')]);
  await vercel(server);
  await langchain(server);
  await openaiZod(server);
  await responses(server);
  await messages(server);
  assert.equal((await server.stop()).code, 0);
});
