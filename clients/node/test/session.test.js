// session.test.js -- sessions against a real dlockd and redis-server
// (harness.js): holdings kept by the session's own heartbeat, released
// at once when it ends, loss told when it is ended from outside or a
// holding is dropped, and the all-or-none multi-lock.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { ConflictError, LostError } from '../index.js';
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

const client = (url = plain) => recording.client({ url });
const state = (name, kind = 'lock') => client().status(name, { kind });
const http = async (method, path) => (await fetch(`${plain}${path}`, { method })).status;
// resolves to the ms signal took to abort, or fails after ms
const abortedWithin = (signal, ms, what) => new Promise((resolve, reject) => {
  const t0 = performance.now();
  if (signal.aborted) return resolve(0);
  const t = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(performance.now() - t0); });
});

test('a session keeps two holdings across 3 leases by its own heartbeat; ending it serves a waiter at once',
  { timeout: 30000 }, async () => {
    const p = await h.proxy(plain);
    const ttl = 1500;
    const session = await client(p.url).session({ ttlMs: ttl, name: 'node-test' });
    const a = await session.acquire('node-s-a', { waitMs: 0 });
    const b = await session.acquire('node-s-b', { kind: 'read', waitMs: 0 });
    assert.equal(a.owner, session.id);
    assert.ok(a.fencingToken > 0 && b.fencingToken > 0);
    await delay(3 * ttl + 500);
    assert.equal(session.held, true);
    assert.equal(session.signal.aborted, false);
    const listed = await session.holdings();
    assert.deepEqual(listed.map((x) => [x.kind, x.name, x.fencingToken]).sort(),
      [['lock', 'node-s-a', a.fencingToken], ['read', 'node-s-b', b.fencingToken]]);
    assert.equal((await state('node-s-a')).index, a.fencingToken, 'the same holding after 3 leases');
    const beats = p.count(`POST /sessions/${session.id}/heartbeat 200`);
    assert.ok(beats >= 5 && beats <= 16, `${beats} heartbeats in 5 s of a 1.5 s lease, want about 10`);
    assert.equal(p.count('POST /locks') + p.count('POST /rwlocks'), 0, 'a heartbeat per lock');

    let granted = 0;
    const waiter = client().acquire('node-s-a', { waitMs: 10000 }).then((held) => { granted = performance.now(); return held; });
    await delay(500); // the waiter is waiting
    assert.equal(granted, 0, 'granted while the session held it');
    const t0 = performance.now();
    await session.close();
    const held = await waiter;
    console.log(`# waiter granted ${Math.round(granted - t0)} ms after the session's close began`);
    assert.ok(granted - t0 < 1000, `waiter served ${granted - t0} ms after the end`);
    assert.equal((await state('node-s-b', 'read')).locked, false);
    assert.equal(session.held, false);
    assert.equal(session.lostError, null);
    await held.release();
    await delay(ttl);
    assert.match(p.log.at(-1), /^DELETE \/sessions\//, `requests after the close: ${p.log.slice(-3)}`);
    p.close();
  });

test('a session ended from outside is told lost; close() after it is no error', { timeout: 20000 }, async () => {
  const ttl = 1500;
  const session = await client().session({ ttlMs: ttl });
  await session.acquire('node-s-ended', { kind: 'fair', waitMs: 0 });
  assert.equal(await http('DELETE', `/sessions/${session.id}`), 200);
  const ms = await abortedWithin(session.signal, 2 * ttl, 'loss after DELETE');
  console.log(`# loss told ${Math.round(ms)} ms after the session was ended from outside`);
  assert.equal(session.held, false);
  assert.ok(session.signal.reason instanceof LostError);
  assert.match(session.lostError.message, /session_not_found/);
  await session.close();
  await assert.rejects(session.acquire('node-s-ended2', { waitMs: 0 }), (e) => e.code === 'session_not_found');
});

test('a holding dropped from a session (force release) is a loss of the session', { timeout: 20000 }, async () => {
  const ttl = 1500;
  const session = await client().session({ ttlMs: ttl });
  await session.acquire('node-s-drop', { kind: 'semaphore', limit: 2, waitMs: 0 });
  await session.acquire('node-s-keep', { waitMs: 0 });
  assert.equal(await http('DELETE', '/semaphores/node-s-drop?force=true'), 200);
  await abortedWithin(session.signal, 2 * ttl, 'loss after a drop');
  assert.match(session.lostError.message, /dropped.*semaphore 'node-s-drop'/);
  await session.close();
  assert.equal((await state('node-s-keep')).locked, false, 'close after a loss did not release the rest');
});

test('multi-lock: all or none with a blocker, then granted when it releases', { timeout: 30000 }, async () => {
  const blocker = await client().acquire('node-m-b', { ttlMs: 20000 });
  await client().withSession(async (signal, session) => {
    const set = [{ kind: 'write', name: 'node-m-a' }, { kind: 'lock', name: 'node-m-b' }];
    const t0 = performance.now();
    await assert.rejects(session.acquireAll(set, { waitMs: 1000 }),
      (e) => e instanceof ConflictError && e.code === 'locked' && e.lock?.name === 'node-m-b');
    assert.ok(performance.now() - t0 >= 900, 'refused before wait_ms');
    assert.deepEqual(await session.holdings(), [], 'a 409 left something held');
    assert.equal((await state('node-m-a', 'write')).locked, false);

    setTimeout(() => blocker.release(), 4000); // past one --max-wait-ms poll
    const t1 = performance.now();
    const got = await session.acquireAll(set, { waitMs: 20000 });
    assert.ok(performance.now() - t1 >= 3500, 'granted while the blocker held');
    assert.deepEqual(got.map((x) => x.name).sort(), ['node-m-a', 'node-m-b']);
    assert.ok(got.every((x) => x.fencingToken > 0 && x.owner === session.id));
    assert.equal((await state('node-m-b')).index, got.find((x) => x.name === 'node-m-b').fencingToken);
    assert.equal(signal.aborted, false);
  }, { ttlMs: 3000 });
  assert.equal((await state('node-m-b')).locked, false, 'withSession left it held');
  assert.equal((await state('node-m-a', 'write')).locked, false);
});

// counted from the sending of the last heartbeat dlockd confirmed: told
// before that heartbeat's arrival (at the proxy) plus the lease
test('a session whose heartbeats fail is told lost before its lease can end', { timeout: 20000 }, async () => {
  const p = await h.proxy(plain);
  const ttl = 3000;
  const session = await client(p.url).session({ ttlMs: ttl });
  await session.acquire('node-s-cut', { waitMs: 0 });
  await delay(1200); // a heartbeat confirmed
  p.dropBeats = true;
  await abortedWithin(session.signal, 2 * ttl, 'loss with heartbeats failing');
  const lost = performance.now();
  assert.ok(p.lastBeat > 0 && lost <= p.lastBeat + ttl, 'told after the lease of the last heartbeat ended');
  assert.ok(lost >= p.lastBeat + ttl / 2, 'told too early');
  assert.match(session.lostError.message, /no renewal confirmed/);
  p.dropBeats = false;
  await session.close();
  assert.equal((await state('node-s-cut')).locked, false, 'close after the loss left it held');
  p.close();
});
