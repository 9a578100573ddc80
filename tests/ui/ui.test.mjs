// ui.test.mjs -- the status page (/ui) in a real headless Chromium (Debian's
// `chromium`, driven by puppeteer-core): starts its own redis-server and
// dlockd (auth on: an admin and a client token) on free loopback ports,
// takes and releases locks over HTTP and checks that the page follows; the
// detail view with a fair lock's queue; a forced release as admin (the
// holder's heartbeat then answers not_held) and refused as a client token;
// a semaphore held by two owners (limit, holders, waiting; released, then
// forced back); the token kept across a reload; no request leaves dlockd's origin and
// nothing breaks the page's Content-Security-Policy. TAP on stdout.
//   node tests/ui/ui.test.mjs BUILD_DIR
// DLOCKD_UI_SCREENSHOT=FILE also saves a screenshot of the page (with a
// lock's detail and queue) to FILE (`make ui-screenshot`).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const build = process.argv[2] || 'build';
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const WAIT = 20000;	// generous: the machine may be loaded
const ADMIN = 'a1d3e5f7a1d3e5f7a1d3e5f7a1d3e5f7';
const CLIENT = 'c0ffee00c0ffee00c0ffee00c0ffee00';

let n = 0, failed = 0;
const children = [];
let browser = null;
const tmp = mkdtempSync(path.join(os.tmpdir(), 'dlockd-ui-'));

function ok(cond, what, detail) {
	n++;
	if (cond) {
		console.log(`ok ${n} - ${what}`);
	} else {
		failed++;
		console.log(`not ok ${n} - ${what}`);
		if (detail)
			console.log('# ' + String(detail).split('\n').join('\n# '));
	}
	return cond;
}

function freePort() {
	return new Promise((resolve, reject) => {
		const s = net.createServer();
		s.on('error', reject);
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, ms = WAIT) {
	const end = Date.now() + ms;
	let last;
	while (Date.now() < end) {
		try {
			if ((last = await fn()))
				return last;
		} catch (e) {
			last = e;
		}
		await sleep(100);
	}
	throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

function start(cmd, args) {
	const p = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
	let err = '';
	p.stderr.on('data', (d) => { err = (err + d).slice(-4000); });
	p.log = () => err;
	children.push(p);
	return p;
}

function redisPing(port) {
	return new Promise((resolve) => {
		const c = net.connect(port, '127.0.0.1', () => c.write('PING\r\n'));
		c.on('data', (d) => { c.destroy(); resolve(String(d).startsWith('+PONG')); });
		c.on('error', () => resolve(false));
	});
}

let base;
async function http(method, p, tok, body) {
	const headers = tok ? { Authorization: 'Bearer ' + tok } : {};
	if (body)
		headers['Content-Type'] = 'application/json';
	const r = await fetch(base + p, { method, headers, body: body && JSON.stringify(body) });
	let json = null;
	try { json = await r.json(); } catch (e) { json = null; }
	return { status: r.status, body: json };
}

// the text of the overview's row for name, or null when it has none
async function rowText(page, name) {
	return page.evaluate((nm) => {
		for (const tr of document.querySelectorAll('#locks tbody tr'))
			if (tr.dataset.name === nm)
				return tr.innerText;
		return null;
	}, name);
}

async function openPage(token, problems) {
	const page = await browser.newPage();
	page.on('console', (m) => {
		if (m.type() === 'error' && !/status of 40[13]/.test(m.text()))
			problems.push('console: ' + m.text());
	});
	page.on('pageerror', (e) => problems.push('page error: ' + e.message));
	page.on('request', (rq) => {
		if (!rq.url().startsWith(base + '/'))
			problems.push('request outside dlockd: ' + rq.url());
	});
	const resp = await page.goto(base + '/ui', { waitUntil: 'load' });
	if (token) {
		await page.type('#token', token);
		await page.click('#token-form button[type=submit]');
	}
	return { page, resp };
}

async function main() {
	const redisPort = await freePort();
	const port = await freePort();
	base = `http://127.0.0.1:${port}`;
	const auth = path.join(tmp, 'tokens');
	writeFileSync(auth, `# <token> <role> <prefix> <name>\n${ADMIN} admin * ops\n` +
		      `${CLIENT} client * viewer\n`);
	start('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '',
			       '--appendonly', 'no']);
	await until('redis-server', () => redisPing(redisPort));
	const dlockd = start(process.env.DLOCKD_BIN || path.join(build, 'dlockd'),
			     ['--listen', `127.0.0.1:${port}`, '--redis', `redis://127.0.0.1:${redisPort}`,
			      '--auth-file', auth]);
	await until('dlockd', async () => (await http('GET', '/readyz')).status === 200)
		.catch((e) => { throw new Error(e.message + '\n' + dlockd.log()); });

	browser = await puppeteer.launch({
		executablePath: chromium,
		headless: true,
		protocolTimeout: 60000,
		args: ['--no-sandbox', '--disable-dev-shm-usage', '--no-first-run'],
	});
	const problems = [];

	// --- admin: load, without a token first
	const { page, resp } = await openPage(null, problems);
	const h = resp.headers();
	ok(resp.status() === 200 && /^text\/html; charset=utf-8$/.test(h['content-type']) &&
	   /default-src 'none'/.test(h['content-security-policy'] || '') &&
	   h['cache-control'] === 'no-cache' && /^"[0-9a-f]+"$/.test(h.etag || ''),
	   'GET /ui: HTML with a strict CSP, no-cache and an ETag', JSON.stringify(h));
	await until('the 401 shown', () => page.$eval('#error', (e) => !e.hidden &&
		/needs a bearer token/.test(e.textContent))).then(
		() => ok(true, 'without a token the page says it needs one'),
		(e) => ok(false, 'without a token the page says it needs one', e.message));

	await page.type('#token', ADMIN);
	await page.click('#token-form button[type=submit]');
	await until('the empty list', () => page.$eval('#empty', (e) => !e.hidden)).then(
		() => ok(true, 'admin token: no lock held, the page says so'),
		(e) => ok(false, 'admin token: no lock held, the page says so', e.message));

	// --- a lock taken over HTTP appears, released disappears
	const got = await http('PUT', '/locks/ui-job?owner=worker-1&ttl_ms=60000', CLIENT);
	ok(got.status === 200, 'PUT /locks/ui-job as the client token', JSON.stringify(got));
	const shown = await until('ui-job listed', () => rowText(page, 'ui-job')).catch((e) => null);
	ok(shown && shown.includes('worker-1') && shown.includes(String(got.body.fencing_token)) &&
	   /\block\b/.test(shown), 'the lock appears with kind, owner and fencing token', shown);
	const lease = await page.evaluate(() => {
		const td = document.querySelector('#locks tbody tr td.lease');
		return td ? td.textContent : '';
	});
	const left = parseFloat(lease);
	ok(/s$/.test(lease) && left > 30 && left <= 60, 'its lease left is shown (about 60 s)', lease);
	const rel = await http('DELETE', '/locks/ui-job?owner=worker-1', CLIENT);
	ok(rel.status === 200, 'DELETE /locks/ui-job', JSON.stringify(rel));
	await until('ui-job gone', async () => (await rowText(page, 'ui-job')) === null).then(
		() => ok(true, 'the released lock disappears'),
		(e) => ok(false, 'the released lock disappears', e.message));

	// --- a semaphore held by two owners: its limit, permits, holders and
	// waiting acquires in the overview and the detail view; one permit
	// given back, then the other forced back from the page: it disappears
	const sem = [];
	for (const o of ['ci-1', 'ci-2'])
		sem.push(await http('PUT', `/semaphores/ui-deploys?owner=${o}&limit=2&ttl_ms=60000` +
				    `&value=build-${o}`, CLIENT));
	ok(sem.every((r) => r.status === 200 && r.body.limit === 2),
	   'PUT /semaphores/ui-deploys (limit 2) as ci-1 and ci-2', JSON.stringify(sem));
	const semWaiter = new AbortController();
	const semWaiting = fetch(base + '/semaphores/ui-deploys?owner=ci-3&limit=2&wait_ms=120000', {
		method: 'PUT', headers: { Authorization: 'Bearer ' + CLIENT }, signal: semWaiter.signal,
	}).catch(() => null);
	const semRow = await until('ui-deploys listed, 1 waiting', async () => {
		const t = await rowText(page, 'ui-deploys');
		return t && /\t1$/.test(t.trim()) ? t : null;
	}).catch((e) => e.message);
	ok(/\bsemaphore\b/.test(semRow) && /2 of 2 permits out/.test(semRow) &&
	   /0 available/.test(semRow) && /ci-1/.test(semRow) && /ci-2/.test(semRow) &&
	   /build-ci-1/.test(semRow) && sem.every((r) => semRow.includes(String(r.body.fencing_token))),
	   'the semaphore appears with its limit, both holders, their values and tokens, 1 waiting',
	   semRow);
	await page.evaluate(() => {
		for (const tr of document.querySelectorAll('#locks tbody tr'))
			if (tr.dataset.name === 'ui-deploys')
				tr.querySelector('button').click();
	});
	const semDetail = await until('the semaphore\'s detail', () => page.evaluate(() => {
		const d = document.getElementById('detail');
		return !d.hidden && /permits out/.test(document.getElementById('detail-state').textContent)
			&& document.querySelectorAll('#detail-holders tbody tr').length === 2
			? d.innerText : null;
	})).catch((e) => e.message);
	ok(/semaphore ui-deploys/.test(semDetail) && /2 of 2 permits out/.test(semDetail) &&
	   /ci-1/.test(semDetail) && /ci-2/.test(semDetail) && /1 waiting/.test(semDetail),
	   'the detail view shows the limit, both permits\' holders and 1 waiting', semDetail);
	semWaiter.abort();
	await semWaiting;
	const semRel = await http('DELETE', '/semaphores/ui-deploys?owner=ci-1', CLIENT);
	ok(semRel.status === 200, 'DELETE /semaphores/ui-deploys?owner=ci-1', JSON.stringify(semRel));
	const semOne = await until('one permit out', async () => {
		const t = await rowText(page, 'ui-deploys');
		return t && /1 of 2 permits out/.test(t) && !/ci-1/.test(t) ? t : null;
	}).catch((e) => e.message);
	ok(/ci-2/.test(semOne) && /1 available/.test(semOne),
	   'ci-1 gone from the row: 1 of 2 permits out, 1 available', semOne);
	await until('force enabled', () => page.$eval('#force', (b) => !b.disabled));
	await page.click('#force');
	await until('the confirmation', () => page.$eval('#confirm', (d) => d.open &&
		/every permit of semaphore 'ui-deploys'/.test(d.textContent)));
	await page.click('#confirm-ok');
	const semForced = await until('Released.', () => page.$eval('#detail-msg', (m) =>
		!m.hidden && m.textContent)).catch((e) => e.message);
	ok(semForced === 'Released.', 'admin: the semaphore\'s permits forced back from the page',
	   semForced);
	const semHb = await http('POST', '/semaphores/ui-deploys/heartbeat?owner=ci-2&ttl_ms=60000',
				 CLIENT);
	ok(semHb.status === 409 && semHb.body && semHb.body.error === 'not_held',
	   'ci-2\'s heartbeat then answers not_held', JSON.stringify(semHb));
	await until('ui-deploys gone', async () => (await rowText(page, 'ui-deploys')) === null).then(
		() => ok(true, 'the semaphore with no permit out disappears'),
		(e) => ok(false, 'the semaphore with no permit out disappears', e.message));
	await page.click('#detail-close');

	// --- a fair lock with a queue: the detail view
	const fair = await http('PUT', '/fairlocks/ui-fair?owner=holder-1&ttl_ms=60000', ADMIN);
	ok(fair.status === 200, 'PUT /fairlocks/ui-fair as holder-1', JSON.stringify(fair));
	const waiter = new AbortController();
	const waiting = fetch(base + '/fairlocks/ui-fair?owner=waiter-1&wait_ms=120000', {
		method: 'PUT', headers: { Authorization: 'Bearer ' + CLIENT }, signal: waiter.signal,
	}).catch(() => null);
	const queued = await until('queue of 1', async () => {
		const t = await rowText(page, 'ui-fair');
		return t && /\t1$/.test(t.trim()) ? t : null;
	}).catch((e) => e.message);
	ok(/holder-1/.test(queued), 'the fair lock shows its holder and a queue of 1', queued);
	await page.evaluate(() => {
		for (const tr of document.querySelectorAll('#locks tbody tr'))
			if (tr.dataset.name === 'ui-fair')
				tr.querySelector('button').click();
	});
	const detail = await until('the detail view', () => page.evaluate(() => {
		const d = document.getElementById('detail');
		const q = document.getElementById('detail-queue').innerText;
		return !d.hidden && /waiter-1/.test(q) ? d.innerText : null;
	})).catch((e) => e.message);
	ok(/holder-1/.test(detail) && /1 waiting/.test(detail) && /waiter-1/.test(detail),
	   'the detail view shows the holder and the queue (waiter-1)', detail);

	// a second lock for the picture, then the picture
	await http('PUT', '/rwlocks/ui-catalog/read?owner=reader-1&ttl_ms=45000', ADMIN);
	await http('PUT', '/locks/ui-nightly-report?owner=worker-7&ttl_ms=300000', CLIENT);
	if (process.env.DLOCKD_UI_SCREENSHOT) {
		await until('three rows', () => page.evaluate(() =>
			document.querySelectorAll('#locks tbody tr').length === 3));
		await page.setViewport({ width: 1100, height: 720 });
		await sleep(300);
		await page.screenshot({ path: process.env.DLOCKD_UI_SCREENSHOT, fullPage: true });
		ok(true, 'screenshot saved to ' + process.env.DLOCKD_UI_SCREENSHOT);
	}

	// the waiter leaves (its connection closed): the queue empties
	waiter.abort();
	await waiting;
	const emptied = await until('queue of 0', () => page.evaluate(() =>
		/\(0 waiting\)/.test(document.getElementById('detail-qlen').textContent)))
		.catch((e) => false);
	ok(emptied, 'the waiter gone, the detail view shows an empty queue');

	// --- a client token cannot force a release
	const { page: cpage } = await openPage(CLIENT, problems);
	const crow = await until('ui-fair listed for the client',
				 () => rowText(cpage, 'ui-fair')).catch((e) => e.message);
	ok(/owner hidden/.test(crow) && !/holder-1/.test(crow),
	   'a client token sees the holding without its owner', crow);
	await cpage.evaluate(() => {
		for (const tr of document.querySelectorAll('#locks tbody tr'))
			if (tr.dataset.name === 'ui-fair')
				tr.querySelector('button').click();
	});
	await until('client detail', () => cpage.$eval('#detail', (d) => !d.hidden &&
		!document.getElementById('force').disabled));
	await cpage.click('#force');
	await until('the confirmation', () => cpage.$eval('#confirm', (d) => d.open));
	await cpage.click('#confirm-ok');
	const refused = await until('the 403', () => cpage.$eval('#detail-msg', (m) =>
		!m.hidden && /403 forbidden/.test(m.textContent) ? m.textContent : null))
		.catch((e) => e.message);
	ok(/403 forbidden/.test(refused), 'a client token\'s forced release is refused: the 403 shown',
	   refused);
	const still = await http('GET', '/fairlocks/ui-fair', ADMIN);
	ok(still.body && still.body.locked === true, 'and the lock is still held', JSON.stringify(still));

	// --- the admin forces the release, after a confirmation (the admin's
	// tab in front again: a background tab's timers and clicks wait)
	await cpage.close();
	await page.bringToFront();
	await page.click('#force');
	await until('the confirmation', () => page.$eval('#confirm', (d) => d.open));
	await page.click('#confirm-cancel');
	await sleep(300);
	const kept = await http('GET', '/fairlocks/ui-fair', ADMIN);
	ok(kept.body && kept.body.locked === true, 'Cancel in the confirmation releases nothing',
	   JSON.stringify(kept));
	await page.click('#force');
	await until('the confirmation', () => page.$eval('#confirm', (d) => d.open));
	await page.click('#confirm-ok');
	const released = await until('Released.', () => page.$eval('#detail-msg', (m) =>
		!m.hidden && m.textContent)).catch((e) => e.message);
	ok(released === 'Released.', 'admin: the forced release is confirmed on the page', released);
	const hb = await http('POST', '/fairlocks/ui-fair/heartbeat', ADMIN, { owner: 'holder-1' });
	ok(hb.status === 409 && hb.body && hb.body.error === 'not_held',
	   'the holder\'s heartbeat then answers not_held', JSON.stringify(hb));
	const free = await until('detail says free', () => page.$eval('#detail-state',
		(s) => /free/.test(s.textContent))).catch(() => false);
	ok(free, 'the detail view (a watch) shows the lock free');
	await until('ui-fair gone', async () => (await rowText(page, 'ui-fair')) === null).then(
		() => ok(true, 'and the overview drops it'),
		(e) => ok(false, 'and the overview drops it', e.message));

	// --- the prefix filter, and the token kept across a reload
	await page.type('#prefix', 'ui-night');
	await until('filtered', () => page.evaluate(() => {
		const rows = [...document.querySelectorAll('#locks tbody tr')];
		return rows.length === 1 && rows[0].dataset.name === 'ui-nightly-report';
	})).then(() => ok(true, 'the prefix filter keeps only ui-nightly-report'),
		 (e) => ok(false, 'the prefix filter keeps only ui-nightly-report', e.message));
	await page.reload({ waitUntil: 'load' });
	const again = await until('rows after reload', () => rowText(page, 'ui-catalog'))
		.catch((e) => e.message);
	ok(/reader-1/.test(again) && /rwlock/.test(again),
	   'after a reload the token is still there (sessionStorage) and the locks listed', again);

	// --- the files: 304 on a matching ETag, and the JS and CSS types
	const js = await fetch(base + '/ui/app.js');
	const css = await fetch(base + '/ui/style.css');
	const again304 = await fetch(base + '/ui/app.js',
				     { headers: { 'If-None-Match': js.headers.get('etag') } });
	ok(js.headers.get('content-type') === 'text/javascript; charset=utf-8' &&
	   css.headers.get('content-type') === 'text/css; charset=utf-8' && again304.status === 304,
	   'app.js and style.css with their types; 304 on a matching If-None-Match',
	   `${js.headers.get('content-type')} ${css.headers.get('content-type')} ${again304.status}`);

	ok(problems.length === 0, 'no console error, CSP violation or request outside dlockd',
	   problems.join('\n'));
}

try {
	await main();
} catch (e) {
	ok(false, 'the UI test ran to its end', e.stack);
} finally {
	if (browser)
		await browser.close().catch(() => {});
	for (const p of children)
		p.kill('SIGTERM');
	rmSync(tmp, { recursive: true, force: true });
}
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
