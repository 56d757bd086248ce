// `turbokv serve` under hostile and careless clients, with a well-behaved
// one beside them, for TURBOKV_SOAK_SECONDS (default 8: the short form ctest runs;
// scripts/soak-serve.sh runs it longer and keeps the figures). Loopback
// only, every loop bounded in count and time. Beside the good client:
//  - TURBOKV_SOAK_IDLE (500) connections that send nothing, reopened as the server
//    closes them;
//  - 6 slowloris connections sending a header byte every 500 ms;
//  - malformed and abusive requests in turn (bad request lines, huge lines
//    and headers, conflicting framing, bad chunks, bad JSON, a 7 MB prompt,
//    a key of a million characters, 10k messages, HTTP/1.0, half-closed
//    requests), each of which must be answered 4xx (or, for the ones that
//    are fine, 2xx) or closed, never left hanging;
//  - streams cut off after their first bytes.
// Fails on: the server exiting, a good request not answered 200 (or taking
// over 10 s), a hostile request left without an answer or a close for 20 s,
// the server's RSS growing more than TURBOKV_SOAK_RSS_GROWTH_MIB (64) from after
// its warm-up to the end, or, when TURBOKV_SOAK_HEALTH_P99_MS is set (the long
// form), the good client's /health p99 over it. Prints one `soak: {...}`
// line of figures.
import assert from 'node:assert/strict';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { main, now, requireModel, startServer } from './lib/harness.mjs';

const SECONDS = Number(process.env.TURBOKV_SOAK_SECONDS || 8);
const IDLE = Number(process.env.TURBOKV_SOAK_IDLE || 500);
const HEALTH_P99_MS = Number(process.env.TURBOKV_SOAK_HEALTH_P99_MS || 0);  // 0: not asserted
const RSS_GROWTH_MIB = Number(process.env.TURBOKV_SOAK_RSS_GROWTH_MIB || 64);
const MODEL = process.env.TURBOKV_SOAK_MODEL || 'stories260K.gguf';

function rssMiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) / 1024;
}

function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// Sends `chunks` on a fresh connection (optionally half-closing after
// them) and resolves with what came back once the server closes, answers
// with a status line and `waitMs` more pass, or 20 s pass (`hung`).
function exchange(port, chunks, { halfClose = false, waitMs = 300 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    let settled = false;
    const done = (hung) => {
      if (settled) return;
      settled = true;
      clearTimeout(limit);
      sock.destroy();
      resolve({ data, hung, status: Number((/^HTTP\/1\.[01] (\d{3})/.exec(data) || [])[1] || 0) });
    };
    const limit = setTimeout(() => done(true), 20_000);
    sock.on('connect', () => {
      for (const c of chunks) sock.write(c);
      if (halfClose) sock.end();
    });
    sock.on('data', (b) => {
      data += b.toString('latin1');
      if (/^HTTP\/1\.[01] \d{3}/.test(data)) setTimeout(() => done(false), waitMs);
    });
    sock.on('close', () => done(false));
    sock.on('error', () => done(false));
  });
}

function post(route, body, extra = '') {
  return `POST ${route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}` +
         `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

// [name, chunks, allowed statuses (0: closed without an answer is fine), options]
function hostileCases() {
  const small = JSON.stringify({ prompt: 'Once', max_tokens: 2 });
  const chunked = `${small.length.toString(16)}\r\n${small}\r\n0\r\n\r\n`;
  const messages = Array.from({ length: 10_000 }, () => ({ role: 'user', content: 'hi' }));
  return [
    ['garbage line', ['GARBAGE\r\n\r\n'], [400]],
    ['binary', [Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 37) % 256))], [400, 0]],
    ['100 KB request line', [`GET /${'a'.repeat(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`], [414]],
    ['9 KB header line', [`GET /health HTTP/1.1\r\nHost: x\r\nX-A: ${'b'.repeat(9000)}\r\n\r\n`], [431]],
    ['80 headers of 1 KB', [`GET /health HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 80 }, (_, i) => `X-${i}: ${'c'.repeat(1000)}\r\n`).join('')}\r\n`], [431]],
    ['two lengths', [post('/v1/completions', small, 'Content-Length: 3\r\n')], [400]],
    ['length and chunked', [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}`], [400]],
    ['bad chunk size', ['POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n'], [400]],
    ['gzip coding', ['POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n'], [501]],
    ['bad json', [post('/v1/completions', '{"prompt": ')], [400]],
    ['deep json', [post('/v1/completions', '['.repeat(100_000))], [400]],
    ['7 MB prompt', [post('/v1/completions', JSON.stringify({ prompt: 'x '.repeat(3_500_000), max_tokens: 1 }))], [400]],
    ['9 MB body', [post('/v1/completions', JSON.stringify({ prompt: 'y'.repeat(9 << 20) }))], [413]],
    ['million-character key', [post('/v1/completions', `{"${'k'.repeat(1_000_000)}": 1, "prompt": "x"}`)], [400]],
    ['10k messages', [post('/v1/chat/completions', JSON.stringify({ messages, max_tokens: 1 }))], [400, 200]],
    ['multipart', ['POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: 44\r\n\r\n--B\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--B--\r\n'], [415, 400]],
    ['HTTP/1.0', [`POST /v1/completions HTTP/1.0\r\nContent-Length: ${small.length}\r\n\r\n${small}`], [200]],
    ['half-closed', ['GET /health HTTP/1.1\r\nHost: x\r\n\r\n'], [200], { halfClose: true }],
    ['unknown route', ['GET /nope HTTP/1.1\r\nHost: x\r\n\r\n'], [404]],
    ['wrong method', ['DELETE /health HTTP/1.1\r\nHost: x\r\n\r\n'], [405]],
    ['no body', ['POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n'], [400]],
  ];
}

main(async () => {
  const model = requireModel(MODEL);
  const server = await startServer(model, ['-t', '1', '--timeout', '5', '--chat-template', 'chatml']);
  const port = server.port;
  const pid = server.child.pid;
  const client = server.client({ timeout: 10_000 });
  const end = now() + SECONDS * 1000;
  const running = () => now() < end && server.child.exitCode === null;

  // Warm-up: the good request once, then the RSS to compare against.
  await client.completions.create({ model: 'm', prompt: 'Once', max_tokens: 4 });
  const rssStart = rssMiB(pid);
  let rssPeak = rssStart;
  const rssTimer = setInterval(() => {
    try {
      rssPeak = Math.max(rssPeak, rssMiB(pid));
    } catch {}
  }, 100);

  // Idle connections, reopened as the server closes them.
  const idle = new Set();
  let idleOpened = 0;
  const openIdle = () => {
    if (!running()) return;
    const s = net.connect(port, '127.0.0.1');
    ++idleOpened;
    idle.add(s);
    s.on('error', () => {});
    s.on('close', () => {
      idle.delete(s);
      setTimeout(openIdle, 50);
    });
  };
  for (let i = 0; i < IDLE; ++i) openIdle();

  // Slowloris: a header byte every 500 ms.
  const slow = [];
  for (let i = 0; i < 6; ++i) {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.write('GET /health HTTP/1.1\r\nHost: x\r\n');
    const t = setInterval(() => s.writable && s.write('X'), 500);
    slow.push([s, t]);
  }

  // The good client: /health and a short completion in turn.
  const good = { health: [], completion: [], failures: [] };
  const goodLoop = (async () => {
    while (running()) {
      const t0 = now();
      try {
        const r = await fetch(`${server.baseURL}/health`, { signal: AbortSignal.timeout(10_000) });
        if (r.status !== 200) good.failures.push(`health ${r.status}`);
        await r.text();
        good.health.push(now() - t0);
        const t1 = now();
        const c = await client.completions.create({ model: 'm', prompt: 'Once upon', max_tokens: 4 });
        if (!c.choices[0].text) good.failures.push('completion with no text');
        good.completion.push(now() - t1);
      } catch (e) {
        good.failures.push(String(e));
      }
    }
  })();

  // Hostile requests in turn, and streams cut off after their first bytes.
  const hostile = { sent: 0, hung: [], wrong: [] };
  const hostileLoop = (async () => {
    const cases = hostileCases();
    for (let i = 0; running(); ++i) {
      const [name, chunks, allowed, options] = cases[i % cases.length];
      const r = await exchange(port, chunks, options);
      ++hostile.sent;
      if (r.hung) hostile.hung.push(name);
      else if (!allowed.includes(r.status)) hostile.wrong.push(`${name}: ${r.status || 'closed'}`);
      if (i % 4 === 3) {
        const cut = net.connect(port, '127.0.0.1');
        cut.on('error', () => {});
        cut.write(post('/v1/completions', JSON.stringify({ prompt: 'Once', max_tokens: 200, stream: true })));
        await new Promise((res) => cut.once('data', res).once('close', res));
        cut.destroy();
      }
    }
  })();

  // Halfway, the RSS again: a plateau (the allocator's working set) or a
  // slope (a leak) shows between it and the end.
  let rssMid = null;
  const midTimer = setTimeout(() => {
    rssMid = rssMiB(pid);
  }, (SECONDS * 1000) / 2);
  await Promise.all([goodLoop, hostileLoop]);
  clearTimeout(midTimer);
  for (const [s, t] of slow) {
    clearInterval(t);
    s.destroy();
  }
  for (const s of idle) s.destroy();
  // Let the server free what the last requests held, then measure.
  await new Promise((r) => setTimeout(r, 1500));
  clearInterval(rssTimer);
  assert.equal(server.child.exitCode, null, `the server exited:\n${server.output.slice(-2000)}`);
  const rssEnd = rssMiB(pid);
  const figures = {
    seconds: SECONDS,
    model: MODEL,
    idle_connections: IDLE,
    idle_opened: idleOpened,
    hostile_requests: hostile.sent,
    good_requests: good.health.length + good.completion.length,
    health_ms_p50: percentile(good.health, 50),
    health_ms_p99: percentile(good.health, 99),
    completion_ms_p50: percentile(good.completion, 50),
    completion_ms_p99: percentile(good.completion, 99),
    rss_start_mib: +rssStart.toFixed(1),
    rss_mid_mib: rssMid === null ? null : +rssMid.toFixed(1),
    rss_peak_mib: +rssPeak.toFixed(1),
    rss_end_mib: +rssEnd.toFixed(1),
  };
  console.log(`soak: ${JSON.stringify(figures)}`);
  assert.deepEqual(good.failures, [], 'the good client was failed');
  assert.ok(good.health.length > 0, 'the good client got no answer');
  assert.deepEqual(hostile.hung, [], 'hostile requests left hanging');
  assert.deepEqual(hostile.wrong, [], 'hostile requests answered otherwise than documented');
  if (HEALTH_P99_MS > 0)
    assert.ok(figures.health_ms_p99 <= HEALTH_P99_MS,
              `/health p99 ${figures.health_ms_p99.toFixed(1)} ms (bound ${HEALTH_P99_MS})`);
  assert.ok(rssEnd - rssStart <= RSS_GROWTH_MIB,
            `RSS grew ${(rssEnd - rssStart).toFixed(1)} MiB (bound ${RSS_GROWTH_MIB})`);
  assert.equal((await server.stop()).code, 0);
});
