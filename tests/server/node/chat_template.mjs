// Chat requests are rendered with the model's own chat template: a model
// synthesized with phi-3's vocabulary and template (random weights) is served
// with that template (executed: it has no system turn), and the prompt the
// server counts is exactly its rendering (BOS + <|user|>\n...<|end|>\n
// <|assistant|>\n with its control tokens), which POST /apply-template and
// `turbokv template` show; --chat-template overrides it.
import assert from 'node:assert/strict';
import path from 'node:path';
import fs from 'node:fs';
import { fail, main, request, requireModel, runTurbokv, startServer, tempDir, tokenize } from './lib/harness.mjs';

main(async () => {
  const vocab = requireModel('vocab/ggml-vocab-phi-3.gguf');
  const model = path.join(tempDir(), 'phi3-synth.gguf');
  const synth = await runTurbokv(['synth', '--like', 'tiny', '--layers', '1', '--vocab-from', vocab, '--out', model]);
  if (synth.code !== 0) fail(`turbokv synth failed: ${synth.stderr}`);

  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hello there' },
  ];
  const phi3 = '<|user|>\nHello there<|end|>\n<|assistant|>\n';
  const chatml =
    '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n';
  const phi3Ids = await tokenize(model, phi3);
  // The markers are single control tokens of this vocabulary.
  assert.ok(phi3Ids.length < phi3.length / 2, `phi3 rendering tokenized to ${phi3Ids.length} ids`);

  for (const [args, name, rendered, bos] of [
    [[], 'model', phi3, '<s>'],
    [['--chat-template', 'chatml'], 'chatml', chatml, ''],
  ]) {
    const server = await startServer(model, ['-t', '1', ...args]);
    assert.match(server.output, new RegExp(`template ${name}\\b`));
    const client = server.client();
    const reply = await client.chat.completions.create({
      model: 'phi3-synth', messages, max_tokens: 3, temperature: 0,
    });
    assert.equal(reply.usage.prompt_tokens, 1 + (await tokenize(model, rendered)).length, name);
    assert.ok(reply.usage.completion_tokens <= 3);
    const applied = await request(server, 'POST', '/apply-template', { body: { messages } });
    assert.equal(applied.status, 200);
    assert.deepEqual(applied.json, { prompt: bos + rendered });
    assert.equal((await server.stop()).code, 0);
  }

  // `turbokv template` prints the same rendering.
  const conv = path.join(tempDir(), 'conv.json');
  fs.writeFileSync(conv, JSON.stringify({ messages }));
  const printed = await runTurbokv(['template', '-m', model, '--messages', conv]);
  assert.equal(printed.code, 0, printed.stderr);
  assert.equal(printed.stdout, '<s>' + phi3);

  // An unknown template name is a command-line error.
  const bad = await runTurbokv(['serve', '-m', model, '--chat-template', 'nonesuch', '--port', '0']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /nonesuch/);
});
