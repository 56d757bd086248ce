// A greedy completion from the server is the text `turbokv run --temp 0`
// prints for the same prompt and length, streamed or not, on stories260K and
// tkv-test-23M (same KV codec, thread count and prefill chunking on both
// sides, since a prompt's chunking decides the last bits of its prefill: a
// prompt of at most 256 tokens is one chunk in the server, as in `run`
// with its default -ub; a longer one goes on the server's 16-token grid,
// `run -ub 16`).
// No prompt here starts with a whole 64-token block of an earlier one, so
// none is served from the prefix cache (a hit would give the same bits as
// a fresh prefill too: tests/server/exact_reuse_test.cc).
import assert from 'node:assert/strict';
import { main, modelsDir, runGreedy, startServer, streamTimed, skip } from './lib/harness.mjs';
import { existsSync } from 'node:fs';
import path from 'node:path';

const CASES = {
  'stories260K.gguf': [
    ['Once upon a time', 40],
    ['The little dog', 25],
    ['Lily wanted to play with her friend. One day', 30],
  ],
  'tkv-test-23M.gguf': [
    ['The access code for Amber Falcon is 48213. Question: what is the access code for Amber Falcon? Answer:', 6],
    ['def parse_args(argv):\n    ', 24],
    ['The file system keeps a journal of', 20, 'long'],
  ],
};

main(async () => {
  let ran = 0;
  for (const [file, cases] of Object.entries(CASES)) {
    const model = path.join(modelsDir(), file);
    if (!existsSync(model)) {
      console.log(`${file} not found under ${modelsDir()}: skipped`);
      continue;
    }
    const server = await startServer(model, ['-t', '2', '--kv', 'k4v2']);
    const client = server.client();
    for (const [base, n, kind] of cases) {
      for (const mode of ['whole', 'streamed']) {
        let prompt = base;
        const runArgs = ['--kv', 'k4v2', '-t', '2'];
        if (kind === 'long') {
          // ~400 tokens: past the one-chunk prompts, several grid chunks;
          // each mode its own prompt.
          prompt = `${mode === 'whole' ? 'Each' : 'Every'} ${base} ${'pages of metadata and data blocks, '.repeat(60)}and`;
          runArgs.push('-ub', '16');
        }
        const expected = await runGreedy(model, prompt, n, runArgs);
        const params = { model: 'm', prompt, max_tokens: n, temperature: 0 };
        const text =
          mode === 'whole'
            ? (await client.completions.create(params)).choices[0].text
            : (await streamTimed(client, 'completions', params)).text;
        assert.equal(text, expected, `${file} ${JSON.stringify(prompt.slice(0, 40))} (${mode})`);
      }
      ran++;
    }
    assert.equal((await server.stop()).code, 0);
  }
  if (ran === 0) skip(`neither stories260K.gguf nor tkv-test-23M.gguf under ${modelsDir()}`);
  if (ran < 6 && process.env.TURBOKV_REQUIRE_FIXTURES === '1') throw new Error('a model fixture is missing');
});
