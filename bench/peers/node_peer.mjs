// node_peer.mjs -- one measurement of a Node lock library for
// bench/peers/peers.py: redlock (Redlock over one Redis) or
// redis-semaphore's Mutex, on ioredis.
//
//   node node_peer.mjs PEER REDIS_PORT MODE CLIENTS SECONDS OUT
//
// PEER redlock | redis-semaphore. MODE cycles: CLIENTS concurrent loops,
// each acquiring and releasing a name of its own (uncontended), as many
// times as it can for SECONDS. MODE handoff: CLIENTS loops contending on
// one name, each noting (performance.timeOrigin + now, in ms, the clock
// peers.py pairs across processes) its grant and, just before sending
// it, its release. Writes {"cycles": n, "grants": [[grant_ms,
// release_ms], ...], "errors": n} to OUT. Each library is used as its
// README shows, with its default retry settings for a waiting acquire.
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import Redlock from 'redlock';
import { Mutex } from 'redis-semaphore';

const [peer, port, mode, clientsArg, secondsArg, out] = process.argv.slice(2);
const clients = Number(clientsArg);
const until = performance.now() + Number(secondsArg) * 1000;
const wall = () => performance.timeOrigin + performance.now();
const redis = new Redis({ port: Number(port), host: '127.0.0.1', lazyConnect: false });
const result = { cycles: 0, grants: [], errors: 0 };

// acquire(name) resolves to a release function
let acquire;
if (peer === 'redlock') {
  // the hot lock waits as redlock does: retryCount * retryDelay (200 ms
  // by default), long enough for the run
  const redlock = new Redlock([redis], { retryCount: 1000, retryDelay: 200, retryJitter: 200 });
  acquire = async (name) => {
    const lock = await redlock.lock(name, 10000);
    return () => lock.unlock();
  };
} else if (peer === 'redis-semaphore') {
  acquire = async (name) => {
    const m = new Mutex(redis, name, { lockTimeout: 10000, acquireTimeout: 30000 });
    await m.acquire();
    return () => m.release();
  };
} else {
  console.error(`node_peer: no peer ${peer}`);
  process.exit(2);
}

async function loop(i) {
  const name = mode === 'handoff' ? 'peers-hot' : `peers-${i}`;
  while (performance.now() < until) {
    try {
      const release = await acquire(name);
      const granted = wall();
      if (mode === 'handoff') await new Promise((r) => setTimeout(r, 20)); // the others wait
      const released = wall();
      await release();
      result.cycles++;
      if (mode === 'handoff') {
        result.grants.push([granted, released]);
        await new Promise((r) => setTimeout(r, 50)); // the next grant goes to a waiter
      }
    } catch (e) {
      result.errors++;
      if (result.errors === 1) console.error(`node_peer ${peer}: ${e}`);
    }
  }
}

await Promise.all(Array.from({ length: clients }, (_, i) => loop(i)));
redis.disconnect();
writeFileSync(out, JSON.stringify(result));
