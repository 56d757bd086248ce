// kill -9 in the middle of a --cache-dir write, then restart: the server
// starts, deletes the half-written file and never loads it (the prompt is
// prefilled again, and the reply equals the cold one). A finished file whose
// bytes are damaged afterwards fails its checksum on load: one warning, not
// used, the reply again equals the cold one. The write is made to stop
// half-way by the test-only build turbokv-faults under
// TURBOKV_FAULT_CACHE_WRITE=pause:MS (it flushes the first 4 KiB of the
// temporary file and sleeps).
import assert from 'node:assert/strict';
import { openSync, readSync, readdirSync, statSync, writeSync, closeSync } from 'node:fs';
import path from 'node:path';
import { faultsBinary, filler, main, requireModel, startServer, tempDir } from './lib/harness.mjs';

// The server's warnings about its cache (tkv-test-23M also draws one for
// having no chat template).
function cacheWarnings(output) {
  return (output.match(/warning[^\n]*/g) || []).filter((w) => !w.includes('chat template'));
}

async function waitFor(pred, what, ms = 20000) {
  const start = Date.now();
  while (!pred()) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

main(async () => {
  const model = requireModel('tkv-test-23M.gguf');
  const dir = tempDir();
  const prompt = `${await filler(1000, 40000)} Question: what is this about? Answer:`;
  const params = { model: 'm', prompt, max_tokens: 8, temperature: 0 };
  // Cache files end in .tkvs; anything else is a write in progress.
  const temporary = () => readdirSync(dir).filter((f) => !f.endsWith('.tkvs'));
  const finished = () => readdirSync(dir).filter((f) => f.endsWith('.tkvs'));

  // 1. The shutdown's cache write is killed half-way.
  const first = await startServer(model, ['-t', '2', '--cache-dir', dir], { binary: faultsBinary(), env: { TURBOKV_FAULT_CACHE_WRITE: 'pause:30000' } });
  const cold = await first.client().completions.create(params);
  assert.equal(cold.usage.prompt_tokens_details.cached_tokens, 0);
  first.child.kill('SIGTERM');
  await waitFor(() => temporary().some((f) => statSync(path.join(dir, f)).size >= 4096), 'a half-written cache file');
  first.child.kill('SIGKILL');
  assert.equal((await first.exited).signal, 'SIGKILL');
  assert.deepEqual(finished(), [], 'nothing but the half-written file');

  // 2. Restart: the debris is gone, the prompt is prefilled again.
  const second = await startServer(model, ['-t', '2', '--cache-dir', dir]);
  assert.deepEqual(temporary(), [], 'the half-written file was deleted');
  const again = await second.client().completions.create(params);
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(again.choices[0].text, cold.choices[0].text);
  assert.equal((await second.stop()).code, 0);
  const files = finished();
  assert.ok(files.length > 0, 'a clean shutdown wrote the prefix');

  // 3. Damage the middle of every finished file: its checksum fails on load.
  for (const f of files) {
    const p = path.join(dir, f);
    const size = statSync(p).size;
    const fd = openSync(p, 'r+');
    const buf = Buffer.alloc(64);
    readSync(fd, buf, 0, 64, Math.floor(size / 2));
    for (let i = 0; i < 64; i++) buf[i] ^= 0x5a;
    writeSync(fd, buf, 0, 64, Math.floor(size / 2));
    closeSync(fd);
  }
  const third = await startServer(model, ['-t', '2', '--cache-dir', dir]);
  const checked = await third.client().completions.create(params);
  assert.equal(checked.usage.prompt_tokens_details.cached_tokens, 0, 'a damaged file is not used');
  assert.equal(checked.choices[0].text, cold.choices[0].text);
  assert.equal(cacheWarnings(third.output).length, 1, `one warning:\n${third.output}`);
  assert.equal((await third.stop()).code, 0);
});
