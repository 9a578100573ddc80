// client.mjs -- take a dlockd lock (waiting up to 10 s), work while the
// library renews its lease, release it: also when the work fails or the
// process gets Ctrl-C or SIGTERM. Uses the client library in clients/node
// (Node 20, built-ins only). DLOCKD_URL picks the server, DLOCKD_LOCK the
// lock.
import { setTimeout as sleep } from 'node:timers/promises';
// once installed (npm install /path/to/dlockd/clients/node): from 'dlockd'
import { Client } from '../clients/node/index.js';

const LOCK = process.env.DLOCKD_LOCK ?? 'nightly-report';
const client = new Client(); // $DLOCKD_URL, else http://127.0.0.1:8080

// Ctrl-C and SIGTERM abort the wait, or the work: withLock then releases.
const stop = new AbortController();
let exitCode = 0;
for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]]) {
  process.on(sig, () => { exitCode = code; stop.abort(new Error(sig)); });
}

let acquired = false;
try {
  // the owner id is unique per acquire: two runs never share a holding
  await client.withLock(LOCK, async (signal, held) => {
    acquired = true;
    console.log('acquired, fencing token', held.fencingToken);
    for (let step = 1; step <= 3; step++) {
      console.log('working, step', step);
      // signal aborts on Ctrl-C, or the moment the lease is lost: stop working
      await sleep(1000, undefined, { signal });
    }
    console.log('done, releasing');
  }, { ttlMs: 15000, waitMs: 10000, signal: stop.signal });
} catch (err) {
  if (!stop.signal.aborted) {
    const why = err.code === 'unreachable'
      ? `cannot reach dlockd at ${client.url.origin}: ${err.cause?.code ?? err.message}` : err.message;
    console.error(`client.mjs: ${why}`);
    exitCode = 1;
  }
} finally {
  if (acquired) console.log('released'); // withLock released it on the way out
  client.close();
}
process.exit(exitCode);
