// dlockd.test.js -- the library's promises, each tried against a real
// dlockd and redis-server (harness.js).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import {
  Client, ConflictError, NotHeldError, UnauthorizedError, UnavailableError, LostError, DlockdError,
} from '../index.js';
import * as h from './harness.js';

const TLS_CODES = ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN'];
let plain; // dlockd over HTTP, --max-wait-ms 3000
let secure; // over HTTPS with mutual TLS and --auth-file
let tls; // {ca, cert, key}

before(async () => {
  const redisPort = await h.freePort();
  await h.startRedis(redisPort);
  plain = (await h.startDlockd(redisPort, ['--max-wait-ms', '3000'])).base;
  tls = h.makePKI();
  const auth = join(h.dir, 'tokens');
  writeFileSync(auth, `${h.CLIENT_TOKEN} client node- node-client\n${h.ADMIN_TOKEN} admin * ops\n`);
  secure = (await h.startDlockd(redisPort, ['--auth-file', auth, '--tls-cert', join(h.dir, 'server.pem'),
    '--tls-key', join(h.dir, 'server.key'), '--tls-client-ca', join(h.dir, 'ca.pem')], tls)).base;
});
after(() => h.stopAll());

// every client's answers to the contract log; what they acquired given
// back at the end
const { client, giveBack } = h.recordingClients();
after(giveBack);

const state = (name, kind = 'lock') => client({ url: plain }).status(name, { kind });
const forceRelease = async (path) => {
  const res = await fetch(`${plain}${path}?force=true`, { method: 'DELETE' });
  assert.equal(res.status, 200);
};
// resolves to the ms signal took to abort, or fails after ms
const abortedWithin = (signal, ms, what) => new Promise((resolve, reject) => {
  const t0 = performance.now();
  if (signal.aborted) return resolve(0);
  const t = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(performance.now() - t0); });
});

test('the scoped form renews across several leases and stops at release', { timeout: 30000 }, async () => {
  const p = await h.proxy(plain);
  const c = client({ url: p.url });
  let token;
  await c.withLock('node-renew', async (signal, held) => {
    token = held.fencingToken;
    assert.ok(held.held && token > 0);
    await delay(4000); // a lease is 1.2 s
    assert.equal(signal.aborted, false);
    const st = await state('node-renew');
    assert.equal(st.index, token, 'the same holding after 3 leases');
  }, { ttlMs: 1200 });
  const beats = p.count('POST /locks/node-renew/heartbeat 200');
  assert.ok(beats >= 5 && beats <= 16, `${beats} heartbeats in 4 s of a 1.2 s lease, want about 10`);
  assert.equal((await state('node-renew')).locked, false);
  await delay(1200); // more than a renewal period
  assert.match(p.log.at(-1), /^DELETE /, `requests after the release: ${p.log}`);
  p.close();
});

test('loss is told at once on not_held (the heartbeat tells, the watch refused)', { timeout: 20000 }, async () => {
  const p = await h.proxy(plain);
  p.failWatch = true;
  const held = await client({ url: p.url }).acquire('node-notheld', { ttlMs: 1500 });
  await forceRelease('/locks/node-notheld');
  await abortedWithin(held.signal, 1500, 'loss after not_held');
  assert.equal(held.held, false);
  assert.ok(held.signal.reason instanceof LostError && /not_held/.test(held.signal.reason.message));
  await held.release(); // not_held after a loss is no error
  p.close();
});

// Loss is told by the lease's end less the margin, counted from the
// sending of the last renewal dlockd confirmed: so before that renewal's
// arrival (here, at the proxy) plus the lease, which dlockd's outlasts.
test('loss is told before the lease can end when renewals fail; lost stays lost', { timeout: 20000 }, async () => {
  const p = await h.proxy(plain);
  const ttl = 3000;
  const held = await client({ url: p.url }).acquire('node-renewfail', { ttlMs: ttl });
  await delay(1200); // a renewal confirmed
  p.dropBeats = true;
  const cut = performance.now();
  await abortedWithin(held.signal, 2 * ttl, 'loss with renewals failing');
  const lost = performance.now();
  console.log(`# loss told ${Math.round(lost - cut)} ms after the renewals began to fail, `
    + `${Math.round(p.lastBeat + ttl - lost)} ms before the lease of the last renewal (${ttl} ms) could end`);
  assert.ok(p.lastBeat > 0 && lost <= p.lastBeat + ttl, 'told after the lease of the last renewal ended');
  assert.ok(lost >= p.lastBeat + ttl / 2, 'told too early');
  assert.equal(held.held, false);
  assert.ok(held.lostError instanceof LostError);
  p.dropBeats = false;
  await delay(900);
  assert.equal(held.held, false, 'held again after a loss');
  assert.ok(p.count('POST /locks/node-renewfail/heartbeat 200') <= 2, 'renewals after the cut');
  await held.release();
  assert.equal((await state('node-renewfail')).locked, false, 'the release after a loss left it held');
  p.close();
});

test('held reads the clock: a body that runs synchronously past its lease sees false', { timeout: 20000 }, async () => {
  // no timer of the renewer can run while the body computes: held read a
  // flag they set, so a probe's body (50 ms chunks, checking signal and
  // held) worked on 2 s after another owner had the lock
  const c = client({ url: plain });
  const name = 'node-syncbody';
  let chunks = 0;
  let stopped = false;
  await assert.rejects(c.withLock(name, (signal, held) => {
    const until = performance.now() + 3000;
    while (performance.now() < until) {
      if (signal.aborted || !held.held) {
        stopped = true;
        break;
      }
      const chunk = performance.now() + 50;
      while (performance.now() < chunk);
      chunks++;
    }
  }, { ttlMs: 1000 }), LostError);
  assert.ok(stopped, 'the body saw the loss');
  assert.ok(chunks <= 21, `${chunks} chunks of 50 ms in a 1 s lease`);
  assert.equal((await state(name)).locked, false);
});

test('a wait longer than --max-wait-ms chains polls', { timeout: 30000 }, async () => {
  const holder = await client({ url: plain }).acquire('node-longwait');
  setTimeout(() => holder.release(), 6500);
  const p = await h.proxy(plain);
  const t0 = performance.now();
  const held = await client({ url: p.url }).acquire('node-longwait', { waitMs: 20000 });
  assert.ok(performance.now() - t0 >= 6000, 'granted while held');
  assert.ok(p.count('PUT /locks/node-longwait 409') >= 2, `no chain: ${p.log}`);
  await held.release();
  p.close();
});

test('a 503 is retried after Retry-After within the deadline', { timeout: 40000 }, async () => {
  const port = await h.freePort();
  const redis = await h.startRedis(port);
  const { base } = await h.startDlockd(port);
  redis.kill('SIGKILL');
  await redis.exited;
  const p = await h.proxy(base);
  const t0 = performance.now();
  await assert.rejects(client({ url: p.url, retryForMs: 1500 }).acquire('node-503', { waitMs: 0 }),
    (e) => e instanceof UnavailableError && e.status === 503 && e.code === 'backend_unavailable');
  assert.ok(performance.now() - t0 < 6000);
  setTimeout(() => h.startRedis(port), 2000);
  const held = await client({ url: p.url }).acquire('node-503', { waitMs: 20000 });
  assert.ok(p.count('PUT /locks/node-503 503') >= 2, `no 503 retried: ${p.log}`);
  await held.release();
  p.close();
});

test('a PUT whose answer was lost is retried: one holding, one release', { timeout: 20000 }, async () => {
  const p = await h.proxy(plain);
  p.dropAnswers = 1;
  const held = await client({ url: p.url }).acquire('node-lostanswer', { waitMs: 0 });
  assert.equal(p.count('PUT /locks/node-lostanswer 200'), 2, `${p.log}`);
  const st = await state('node-lostanswer');
  assert.equal(st.holders.length, 1);
  assert.equal(st.holders[0].holds, 1);
  assert.equal(st.index, held.fencingToken);
  await held.release();
  assert.equal((await state('node-lostanswer')).locked, false, 'one release did not free it');
  p.close();
});

test('an abort gives back a queue place, and a grant on its way', { timeout: 20000 }, async () => {
  const c = client({ url: plain });
  const a = await c.acquire('node-cancel', { kind: 'fair' });
  const ac = new AbortController();
  const waiting = c.acquire('node-cancel', { kind: 'fair', signal: ac.signal });
  for (let i = 0; (await state('node-cancel', 'fair')).queue_length !== 1; i++) {
    assert.ok(i < 100, 'the waiter never queued');
    await delay(50);
  }
  ac.abort();
  await assert.rejects(waiting, (e) => e instanceof ConflictError && e.code === 'aborted');
  for (let i = 0; (await state('node-cancel', 'fair')).queue_length !== 0; i++) {
    assert.ok(i < 40, 'the aborted waiter kept its place');
    await delay(50);
  }
  await a.release();
  assert.equal((await state('node-cancel', 'fair')).locked, false, 'granted to an aborted waiter');

  const p = await h.proxy(plain);
  p.delayPutMs = 3000;
  await assert.rejects(client({ url: p.url }).acquire('node-cancel-grant', { waitMs: 0, signal: AbortSignal.timeout(1500) }),
    (e) => e instanceof ConflictError && e.code === 'timeout');
  assert.equal(p.count('PUT /locks/node-cancel-grant 200'), 1, `the grant was not made: ${p.log}`);
  assert.equal((await state('node-cancel-grant')).locked, false, 'an aborted grant is still held');
  p.close();
});

test('the scoped form releases on every way out; asyncDispose releases', { timeout: 20000 }, async () => {
  const c = client({ url: plain });
  const boom = new Error('boom');
  await assert.rejects(c.withLock('node-exit', async () => { throw boom; }), (e) => e === boom);
  assert.equal((await state('node-exit')).locked, false, 'held after an exception');
  assert.equal(await c.withLock('node-exit', async () => 42), 42);
  assert.equal((await state('node-exit')).locked, false);
  const held = await c.acquire('node-exit');
  await held[Symbol.asyncDispose]();
  assert.equal(held.held, false);
  assert.equal((await state('node-exit')).locked, false, 'held after asyncDispose');
});

test('every kind has the same shape; errors are typed', { timeout: 20000 }, async () => {
  const c = client({ url: plain });
  const r1 = await c.acquire('node-rw', { kind: 'read' });
  const r2 = await c.acquire('node-rw', { kind: 'read' });
  await assert.rejects(c.acquire('node-rw', { kind: 'write', waitMs: 200 }),
    (e) => e instanceof ConflictError && e.status === 409 && e.code === 'locked');
  await assert.rejects(c.acquire('node-rw'), (e) => e instanceof DlockdError && e.code === 'wrong_kind');
  await r1.release();
  await r2.release();
  await c.withLock('node-rw', async (signal, held) => {
    assert.equal((await state('node-rw', 'write')).mode, 'write');
    assert.equal(held.kind.side, 'write');
  }, { kind: 'write' });
  const f = await c.acquire('node-fair', { kind: 'fair', ttlMs: 5000 });
  assert.ok(f.fencingToken > 0 && f.ttlMs === 5000);
  await f.release();
  await assert.rejects(c.acquire('x', { kind: 'nope' }), TypeError);
});

test('a force release fires the loss signal within a second; HTTPS, mutual TLS, tokens', { timeout: 20000 }, async () => {
  const c = client({ url: secure, token: h.CLIENT_TOKEN, ...tls });
  const held = await c.acquire('node-forced', { ttlMs: 30000 });
  await delay(200); // the watch is on
  const admin = client({ url: secure, token: h.ADMIN_TOKEN, ...tls });
  const res = await admin._call('DELETE', '/locks/node-forced', { query: { force: 'true' } });
  assert.equal(res.status, 200);
  const took = await abortedWithin(held.signal, 1000, 'loss after a force release');
  console.log(`# loss told ${Math.round(took)} ms after the force release`);
  assert.equal(held.held, false);
  await held.release();
  await assert.rejects(client({ url: secure, token: '', ...tls }).acquire('node-forced'),
    (e) => e instanceof UnauthorizedError && e.code === 'unauthorized');
  await assert.rejects(c.acquire('billing-x'), (e) => e instanceof UnauthorizedError && e.code === 'forbidden');
  await assert.rejects(client({ url: secure, token: h.CLIENT_TOKEN, ca: tls.ca, retryForMs: 0 })
    .acquire('node-forced', { waitMs: 0 }), UnavailableError);
  const t0 = performance.now();
  await assert.rejects(client({ url: secure, token: h.CLIENT_TOKEN }).acquire('node-forced', { waitMs: 0 }),
    (e) => e instanceof UnavailableError && TLS_CODES.includes(e.cause?.code));
  assert.ok(performance.now() - t0 < 2000, 'an unknown CA is not retried');
});

test('three processes contending on one name never overlap', { timeout: 60000 }, async () => {
  const log = join(h.dir, 'holds.log');
  writeFileSync(log, '');
  const rounds = 12;
  const runs = [0, 1, 2].map(() => new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [new URL('./contender.js', import.meta.url).pathname,
      'node-contend', log, String(rounds)], { env: { ...process.env, DLOCKD_URL: plain }, stdio: ['ignore', 'inherit', 'inherit'] });
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`contender exited ${code}`))));
  }));
  await Promise.all(runs);
  const lines = readFileSync(log, 'utf8').trim().split('\n');
  assert.equal(lines.length, 3 * 2 * rounds);
  let open = null;
  let lastToken = 0;
  lines.forEach((line, i) => {
    const [what, pid, token] = line.split(' ');
    if (what === 'start') {
      assert.equal(open, null, `line ${i + 1}: ${line} starts while ${open} holds`);
      assert.ok(Number(token) > lastToken, `line ${i + 1}: token ${token} after ${lastToken}`);
      open = `${pid} ${token}`;
      lastToken = Number(token);
    } else {
      assert.equal(open, `${pid} ${token}`, `line ${i + 1}: ${line} ends while ${open} holds`);
      open = null;
    }
  });
});

test('new Client() takes $DLOCKD_URL and $DLOCKD_TOKEN', { timeout: 20000 }, async () => {
  const saved = { url: process.env.DLOCKD_URL, token: process.env.DLOCKD_TOKEN };
  process.env.DLOCKD_URL = secure;
  process.env.DLOCKD_TOKEN = h.CLIENT_TOKEN;
  try {
    const held = await client({ ...tls }).acquire('node-env');
    await held.release();
    delete process.env.DLOCKD_URL;
    assert.equal(new Client().url.href, 'http://127.0.0.1:8080/');
  } finally {
    for (const [k, v] of [['DLOCKD_URL', saved.url], ['DLOCKD_TOKEN', saved.token]]) {
      if (v === undefined) delete process.env[k]; else process.env[k] = v;
    }
  }
});
