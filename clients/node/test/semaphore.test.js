// semaphore.test.js -- semaphores (kind 'semaphore') against a real
// dlockd and redis-server (harness.js): never more holders than the
// limit, the limit in force named on a mismatch, loss told at once on a
// force release.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { ConflictError, LimitMismatchError, LostError } from '../index.js';
import * as h from './harness.js';

let plain;
const recording = h.recordingClients();

before(async () => {
  const redisPort = await h.freePort();
  await h.startRedis(redisPort);
  plain = (await h.startDlockd(redisPort, ['--max-wait-ms', '3000'])).base;
});
after(async () => {
  await recording.giveBack();
  await h.stopAll();
});

// a Client whose answers go to the contract log, and whose holdings are
// given back at the end
const client = () => recording.client({ url: plain });

test('N+2 contenders on N permits: never more than N inside, all get in', { timeout: 60000 }, async () => {
  const limit = 3;
  const contenders = limit + 2;
  const rounds = 3;
  const c = client();
  let inside = 0;
  let most = 0;
  let done = 0;
  await Promise.all(Array.from({ length: contenders }, async () => {
    for (let r = 0; r < rounds; r++) {
      await c.withLock('node-sem-limit', async (signal, held) => {
        inside++;
        most = Math.max(most, inside);
        try {
          assert.ok(held.fencingToken > 0);
          const st = await c.status('node-sem-limit', { kind: 'semaphore' });
          assert.equal(st.limit, limit);
          assert.ok(st.held <= limit, `dlockd shows ${st.held} permits out of ${limit}`);
          await delay(150);
          assert.equal(signal.aborted, false);
          done++;
        } finally {
          inside--;
        }
      }, { kind: 'semaphore', limit, ttlMs: 5000 });
    }
  }));
  console.log(`# at most ${most} of ${contenders} contenders inside at once (limit ${limit})`);
  assert.ok(most <= limit, `${most} inside at once`);
  assert.equal(done, contenders * rounds);
  const st = await c.status('node-sem-limit', { kind: 'semaphore' });
  assert.equal(st.held, 0);
  assert.equal(st.available, limit);
});

test('another limit than the one in force: LimitMismatchError with that limit, nothing changed', { timeout: 20000 }, async () => {
  const c = client();
  const held = await c.semaphore('node-sem-mismatch', 1);
  assert.ok(held.held && held.fencingToken > 0);
  await assert.rejects(c.semaphore('node-sem-mismatch', 5, { waitMs: 0 }),
    (e) => e instanceof LimitMismatchError && !(e instanceof ConflictError) && e.status === 409
      && e.code === 'limit_mismatch' && e.limit === 1);
  await assert.rejects(c.acquire('node-sem-mismatch', { kind: 'semaphore', limit: 1, waitMs: 0 }),
    (e) => e instanceof ConflictError && e.code === 'locked');
  const st = await c.status('node-sem-mismatch', { kind: 'semaphore' });
  assert.equal(st.limit, 1);
  assert.equal(st.held, 1);
  await assert.rejects(c.acquire('node-sem-x', { kind: 'semaphore' }), TypeError);
  await assert.rejects(c.acquire('node-sem-x', { limit: 2 }), TypeError);
  await held.release();
});

test('a force release of the semaphore aborts every holder\'s signal within a second', { timeout: 20000 }, async () => {
  const c = client();
  const a = await c.semaphore('node-sem-forced', 2, { ttlMs: 30000 });
  const b = await c.semaphore('node-sem-forced', 2, { ttlMs: 30000 });
  await delay(300); // both watch, and see themselves held
  assert.ok(a.held && b.held, 'lost before the force release');
  const t0 = performance.now();
  const res = await fetch(`${plain}/semaphores/node-sem-forced?force=true`, { method: 'DELETE' });
  assert.equal(res.status, 200);
  const aborted = (s) => new Promise((resolve, reject) => {
    if (s.aborted) return resolve();
    const t = setTimeout(() => reject(new Error('not aborted within 1500 ms')), 1500);
    s.addEventListener('abort', () => { clearTimeout(t); resolve(); });
  });
  await Promise.all([aborted(a.signal), aborted(b.signal)]);
  console.log(`# loss told ${Math.round(performance.now() - t0)} ms after the force release was sent`);
  for (const held of [a, b]) {
    assert.equal(held.held, false);
    assert.ok(held.signal.reason instanceof LostError && held.lostError instanceof LostError);
    await held.release(); // its not_held is no error once lost
  }
});

test('a holder past the 100 holders dlockd lists is still seen held, and its loss', { timeout: 30000 }, async () => {
  for (let i = 0; i < 100; i++) {
    const res = await fetch(`${plain}/semaphores/node-sem-101?owner=node-other-${i}&limit=101&ttl_ms=20000`, { method: 'PUT' });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  }
  const c = client();
  const held = await c.semaphore('node-sem-101', 101, { ttlMs: 60000 });
  const st = await c.status('node-sem-101', { kind: 'semaphore' });
  assert.equal(st.held, 101);
  assert.ok(!st.holders.some((x) => x.owner === held.owner), 'the 101st is listed');
  await delay(1000); // the watch has read the state
  assert.ok(held.held, `lost while held: ${held.lostError}`);
  const res = await fetch(`${plain}/semaphores/node-sem-101?force=true`, { method: 'DELETE' });
  assert.equal(res.status, 200);
  await new Promise((resolve, reject) => {
    if (held.signal.aborted) return resolve();
    const t = setTimeout(() => reject(new Error('not aborted within 1500 ms')), 1500);
    held.signal.addEventListener('abort', () => { clearTimeout(t); resolve(); });
  });
  assert.ok(held.lostError instanceof LostError);
});
