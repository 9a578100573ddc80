// client.mjs -- take a dlockd lock (waiting up to 10 s), renew it while
// working, release it: also when the work fails or the process gets Ctrl-C
// or SIGTERM. Node 18+ (global fetch), no packages. DLOCKD_URL picks the
// server, DLOCKD_LOCK the lock.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

const url = process.env.DLOCKD_URL ?? 'http://127.0.0.1:8080';
const lock = `${url}/locks/${process.env.DLOCKD_LOCK ?? 'nightly-report'}`;
// Unique per run: the holder's PUT is granted again (a repeat), so two runs sharing an
// owner would both "hold" the lock at once.
const owner = `report-${randomUUID()}`;

// The JSON answer; throws with the error's code and message on an error
// answer, or with a one-line reason when dlockd cannot be reached.
async function call(method, target, body) {
  let res;
  try {
    res = await fetch(target, {
      method,
      headers: { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30000),
    });
  } catch (err) {
    throw new Error(`cannot reach dlockd at ${url}: ${err.cause?.code ?? err.cause?.message ?? err.message}`);
  }
  const json = await res.json();
  if (!res.ok) throw Object.assign(new Error(`${json.error}: ${json.message}`), { status: res.status });
  return json;
}

let maybeHeld = false;
async function release() {
  if (!maybeHeld) return;
  maybeHeld = false;
  try {
    await call('DELETE', `${lock}?owner=${owner}`);
    console.log('released');
  } catch {
    // not held (never acquired, or the lease ran out), or dlockd is gone
  }
}
for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]])
  process.on(sig, () => release().finally(() => process.exit(code)));

try {
  // From here on the lock may be ours (an interrupted PUT may have been
  // granted), so every way out releases it.
  maybeHeld = true;
  const grant = await call('PUT', lock, { owner, ttl_ms: 15000, wait_ms: 10000 });
  console.log('acquired, fencing token', grant.fencing_token);
  for (let step = 1; step <= 3; step++) {
    console.log('working, step', step);
    await sleep(1000);
    // renew; a 409 not_held means the lease was lost: stop working
    await call('POST', `${lock}/heartbeat`, { owner, ttl_ms: 15000 });
  }
  console.log('done, releasing');
} catch (err) {
  console.error(`client.mjs: ${err.message}`);
  process.exitCode = 1;
} finally {
  await release();
}
