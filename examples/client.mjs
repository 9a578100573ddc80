// client.mjs -- take a dlockd lock (waiting up to 10 s), renew it while
// working, release it. Node 18+ (global fetch), no packages.
const url = process.env.DLOCKD_URL ?? 'http://127.0.0.1:8080';
const lock = `${url}/locks/nightly-report`;

async function call(method, target, body) {
  const res = await fetch(target, {
    method,
    headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const grant = await call('PUT', lock, { owner: 'report-node', ttl_ms: 15000, wait_ms: 10000 });
if (grant.status !== 200) throw new Error(`lock not acquired: ${grant.json.message}`);
console.log('acquired with fencing token', grant.json.fencing_token);
for (let step = 1; step <= 3; step++) {
  console.log('working, step', step);
  const hb = await call('POST', `${lock}/heartbeat`, { owner: 'report-node', ttl_ms: 15000 });
  if (hb.status !== 200) throw new Error(`lease lost: ${hb.json.message}`); // 409 not_held
}
const released = await call('DELETE', `${lock}?owner=report-node`);
console.log('released:', released.json);
