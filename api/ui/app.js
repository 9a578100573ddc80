// app.js -- dlockd's status page (/ui): the locks (and semaphores) held, a
// lock's detail with its queue, and a forced release, all through dlockd's own HTTP API with
// the token kept in sessionStorage. No framework, no outside requests; data
// only ever reaches the page as text (textContent), never as HTML.
//
// How it stays current without polling faster than dlockd allows: the
// overview is one listing (GET /locks, every page) plus each listed lock's
// status, fetched REFRESH_MS after the previous round ended (longer when a
// round took long, and never sooner than a 503's Retry-After); the detail
// view is a watch (GET ...?index=T&wait_ms=N), answered by dlockd the
// moment the lock changes hands. Leases count down in the page between
// answers.
'use strict';

const TOKEN_KEY = 'dlockd.token';
const REFRESH_MS = 2000;	// between the end of a round and the next
const WATCH_MS = 5000;		// a detail watch's wait (the queue is read at least this often)
const STATUS_PARALLEL = 3;	// browsers open 6 connections to a host: leave room
const MAX_LOCKS = 1000;		// shown at most; narrow with the prefix

const $ = (id) => document.getElementById(id);
const state = {
	prefix: '',
	round: 0,		// the overview's current round; older answers are dropped
	timer: null,
	rows: [],		// [{entry (listing), status (GET), at (ms when read)}]
	detail: null,		// {kind, name, status, at, abort}
};

// ----- HTTP -----

function token() {
	return sessionStorage.getItem(TOKEN_KEY) || '';
}

// The API is reached relative to the page (/ui -> /locks), so the page
// works behind a proxy that serves dlockd under a path.
async function api(method, path, signal) {
	const headers = { Accept: 'application/json' };
	if (token())
		headers.Authorization = 'Bearer ' + token();
	const r = await fetch(path, { method, headers, signal, cache: 'no-store',
				      credentials: 'omit' });
	let body = null;
	try {
		body = await r.json();
	} catch (e) {
		body = null;
	}
	const ra = parseInt(r.headers.get('Retry-After') || '', 10);
	return { status: r.status, body, retryAfterMs: ra > 0 ? ra * 1000 : 0 };
}

function problem(r) {
	if (r.body && r.body.error)
		return `${r.status} ${r.body.error}: ${r.body.message || ''}`;
	return `HTTP ${r.status}`;
}

// A kind is the singular of its path: lock -> /locks/, fairlock ->
// /fairlocks/, rwlock -> /rwlocks/, and so on for kinds this page does not
// know yet. The listing says `lock` for a fair lock too (Redis keeps both
// alike); /fairlocks/ reads a plain lock as well, with an empty queue, so
// a `lock` is read there to show a fair lock's queue.
function statusPath(kind, name) {
	const k = kind === 'lock' ? 'fairlock' : kind;
	return `${encodeURIComponent(k)}s/${encodeURIComponent(name)}`;
}

function releasePath(kind, name, mode) {
	const n = encodeURIComponent(name);
	if (kind === 'rwlock')
		return `rwlocks/${n}/${mode === 'write' ? 'write' : 'read'}?force=true`;
	return `${encodeURIComponent(kind)}s/${n}?force=true`;
}

// ----- formatting -----

function el(tag, text, cls) {
	const e = document.createElement(tag);
	if (text !== undefined && text !== null)
		e.textContent = String(text);
	if (cls)
		e.className = cls;
	return e;
}

function leaseText(ttlMs, at) {
	if (typeof ttlMs !== 'number')
		return '—';
	const left = Math.max(0, ttlMs - (Date.now() - at));
	if (left >= 3600000)
		return `${Math.floor(left / 3600000)}h ${Math.floor(left / 60000) % 60}m`;
	if (left >= 60000)
		return `${Math.floor(left / 60000)}m ${Math.floor(left / 1000) % 60}s`;
	return `${(left / 1000).toFixed(1)} s`;
}

function holderNode(h) {
	const span = el('span', null, 'holder');
	if (typeof h.owner === 'string')
		span.append(el('span', h.owner, 'mono'));
	else
		span.append(el('span', 'owner hidden', 'hidden-owner'));
	const side = h.side || h.mode;
	let extra = [];
	if (side)
		extra.push(side);
	if (typeof h.holds === 'number' && h.holds !== 1)
		extra.push(`×${h.holds}`);
	if (extra.length)
		span.append(` (${extra.join(', ')})`);
	return span;
}

function valueText(v) {
	if (v === undefined || v === null)
		return '';
	return typeof v === 'string' ? v : JSON.stringify(v);
}

// A semaphore (GET /semaphores/{name}: limit, available, held, waiting)
// has one holder per permit, each with its own value, and a count of the
// acquires waiting instead of a queue.
function isSemaphore(kind) {
	return kind === 'semaphore';
}

function permitsText(s) {
	const out = [];
	if (typeof s.held === 'number' && typeof s.limit === 'number')
		out.push(`${s.held} of ${s.limit} permits out`);
	else if (typeof s.limit === 'number')
		out.push(`limit ${s.limit}`);
	if (typeof s.available === 'number')
		out.push(`${s.available} available`);
	return out.join(' · ');
}

// ----- the overview -----

function showError(text) {
	const e = $('error');
	e.textContent = text || '';
	e.hidden = !text;
}

function scheduleRefresh(delay) {
	clearTimeout(state.timer);
	state.timer = setTimeout(refresh, delay);
}

async function readStatuses(entries) {
	let next = 0;
	const out = new Array(entries.length);
	async function worker() {
		while (next < entries.length) {
			const i = next++;
			const e = entries[i];
			try {
				const r = await api('GET', statusPath(e.kind, e.name));
				out[i] = r.status === 200 && r.body ? r.body : null;
			} catch (err) {
				out[i] = null;
			}
		}
	}
	await Promise.all(Array.from({ length: STATUS_PARALLEL }, worker));
	return out;
}

async function refresh() {
	const round = ++state.round;
	const started = Date.now();
	let delay = REFRESH_MS;
	clearTimeout(state.timer);
	try {
		const entries = [];
		let cursor = null;
		do {
			const q = new URLSearchParams({ limit: '1000' });
			if (state.prefix)
				q.set('prefix', state.prefix);
			if (cursor)
				q.set('cursor', cursor);
			const r = await api('GET', 'locks?' + q.toString());
			if (round !== state.round)
				return;
			if (r.status !== 200 || !r.body || !Array.isArray(r.body.locks)) {
				delay = Math.max(delay, r.retryAfterMs);
				showError(r.status === 401
					  ? 'This dlockd needs a bearer token: enter it above. ' + problem(r)
					  : problem(r));
				$('status').textContent = '';
				return;
			}
			entries.push(...r.body.locks);
			cursor = typeof r.body.cursor === 'string' ? r.body.cursor : null;
		} while (cursor && entries.length < MAX_LOCKS);
		const shown = entries.slice(0, MAX_LOCKS);
		const statuses = await readStatuses(shown);
		if (round !== state.round)
			return;
		const at = Date.now();
		state.rows = shown.map((entry, i) => ({ entry, status: statuses[i], at }))
			.filter((row) => !row.status || row.status.locked !== false)
			.sort((a, b) => a.entry.name < b.entry.name ? -1 : a.entry.name > b.entry.name ? 1
			      : a.entry.kind < b.entry.kind ? -1 : 1);
		showError(cursor ? `More than ${MAX_LOCKS} locks: showing the first ${MAX_LOCKS}; ` +
			  'narrow them with a prefix.' : '');
		render();
		$('status').textContent = `${state.rows.length} held · updated ` +
			new Date(at).toLocaleTimeString();
	} catch (err) {
		if (round === state.round)
			showError('dlockd cannot be reached: ' + err.message);
	} finally {
		if (round === state.round) {
			// never faster than dlockd answers: a slow round waits longer
			delay = Math.max(delay, 2 * (Date.now() - started));
			scheduleRefresh(delay);
		}
	}
}

function render() {
	const tbody = $('locks').tBodies[0];
	const rows = [];
	for (const row of state.rows) {
		const e = row.entry, s = row.status;
		const holders = s && Array.isArray(s.holders) ? s.holders : e.holders || [];
		const tr = el('tr');
		tr.dataset.name = e.name;
		tr.dataset.kind = e.kind;
		if (state.detail && state.detail.name === e.name && state.detail.kind === e.kind)
			tr.classList.add('selected');
		const name = el('button', e.name, 'link mono');
		name.type = 'button';
		name.title = 'Show this lock and its queue';
		name.addEventListener('click', () => openDetail(e.kind, e.name));
		const cell = el('td');
		cell.append(name);
		tr.append(cell);
		let kind = e.kind;
		if (e.kind === 'lock' && s && s.queue_length > 0)
			kind = 'lock (fair)';
		if (e.mode)
			kind += ` · ${e.mode}`;
		if (isSemaphore(e.kind) && s)
			kind += ` · ${permitsText(s)}`;
		else if (isSemaphore(e.kind) && typeof e.limit === 'number')
			kind += ` · limit ${e.limit}`;
		tr.append(el('td', kind));
		const ht = el('td');
		for (const h of holders)
			ht.append(holderNode(h));
		tr.append(ht);
		const value = isSemaphore(e.kind)
			? holders.map((h) => valueText(h.value)).filter((v) => v).join(', ')
			: valueText(s && 'value' in s ? s.value : e.value);
		tr.append(el('td', value, 'mono'));
		const tokens = holders.map((h) => h.fencing_token).filter((t) => t !== undefined);
		tr.append(el('td', tokens.length ? tokens.join(', ') : '—', 'mono'));
		const lease = el('td', null, 'num lease');
		lease.dataset.ttl = String(s && typeof s.ttl_ms === 'number' ? s.ttl_ms : e.ttl_ms);
		lease.dataset.at = String(row.at);
		lease.textContent = leaseText(Number(lease.dataset.ttl), row.at);
		tr.append(lease);
		const waiting = isSemaphore(e.kind) ? s && s.waiting : s && s.queue_length;
		tr.append(el('td', typeof waiting === 'number' ? waiting : '—', 'num queue'));
		rows.push(tr);
	}
	tbody.replaceChildren(...rows);
	$('empty').hidden = rows.length > 0;
}

// Leases count down between answers (no request).
function tick() {
	for (const td of document.querySelectorAll('td.lease'))
		td.textContent = leaseText(Number(td.dataset.ttl), Number(td.dataset.at));
}

// ----- the detail view: a watch of one lock -----

function openDetail(kind, name) {
	closeDetail();
	const d = { kind, name, status: null, at: 0, abort: new AbortController() };
	state.detail = d;
	$('detail-title').textContent = `${kind} ${name}`;
	$('detail-state').textContent = 'reading…';
	detailMessage('');
	$('detail').hidden = false;
	render();
	watch(d);
}

function closeDetail() {
	if (state.detail)
		state.detail.abort.abort();
	state.detail = null;
	$('detail').hidden = true;
	render();
}

function detailMessage(text, bad) {
	const m = $('detail-msg');
	m.textContent = text;
	m.hidden = !text;
	m.className = bad ? 'bad' : '';
}

const sleep = (ms, signal) => new Promise((resolve) => {
	const t = setTimeout(resolve, ms);
	signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

async function watch(d) {
	let index = null;
	while (state.detail === d) {
		const q = index === null ? '' : `?index=${index}&wait_ms=${WATCH_MS}`;
		let r;
		try {
			r = await api('GET', statusPath(d.kind, d.name) + q, d.abort.signal);
		} catch (err) {
			if (d.abort.signal.aborted)
				return;
			$('detail-state').textContent = 'dlockd cannot be reached: ' + err.message;
			await sleep(REFRESH_MS, d.abort.signal);
			continue;
		}
		if (state.detail !== d)
			return;
		if (r.status === 200 && r.body) {
			d.status = r.body;
			d.at = Date.now();
			index = typeof r.body.index === 'number' ? r.body.index : null;
			renderDetail(d);
			if (index === null)	// no watch on this kind: read again later
				await sleep(REFRESH_MS, d.abort.signal);
		} else {
			$('detail-state').textContent = problem(r);
			await sleep(Math.max(REFRESH_MS, r.retryAfterMs), d.abort.signal);
		}
	}
}

function renderDetail(d) {
	const s = d.status;
	const sem = isSemaphore(d.kind);
	$('detail-state').textContent = s.locked
		? `held${s.mode ? ' (' + s.mode + ')' : ''}${sem ? ' · ' + permitsText(s) : ''}` +
		  ` · index ${s.index}`
		: `free (nobody holds it now)${sem ? ' · ' + permitsText(s) : ''}`;
	const rows = (Array.isArray(s.holders) ? s.holders : []).map((h) => {
		const tr = el('tr');
		const owner = el('td');
		owner.append(typeof h.owner === 'string' ? el('span', h.owner, 'mono')
			     : el('span', 'owner hidden', 'hidden-owner'));
		if (sem && h.value !== undefined)	// a permit's value, after its owner
			owner.append(' · ', el('span', valueText(h.value), 'mono'));
		tr.append(owner, el('td', h.side || h.mode || (sem ? 'permit' : '')),
			  el('td', typeof h.holds === 'number' ? h.holds : sem ? 1 : '', 'num'),
			  el('td', h.fencing_token !== undefined ? h.fencing_token : '—', 'mono'));
		const lease = el('td', leaseText(h.ttl_ms, d.at), 'num lease');
		lease.dataset.ttl = String(h.ttl_ms);
		lease.dataset.at = String(d.at);
		tr.append(lease);
		return tr;
	});
	$('detail-holders').tBodies[0].replaceChildren(...rows);
	const queue = Array.isArray(s.queue) ? s.queue : [];
	const waiting = sem ? s.waiting : s.queue_length;
	$('detail-qlen').textContent = typeof waiting === 'number'
		? `(${waiting} waiting${sem ? ', in no set order' : ''})` : '(none for this kind)';
	$('detail-queue').replaceChildren(...queue.map((p) => {
		const li = el('li');
		li.append(typeof p.owner === 'string' ? el('span', p.owner, 'mono')
			  : el('span', 'owner hidden', 'hidden-owner'));
		li.append(` · place kept ${leaseText(p.ttl_ms, d.at)}`);
		return li;
	}));
	$('force').disabled = !s.locked;
}

// ----- the forced release (admin tokens) -----

function askForce() {
	const d = state.detail;
	if (!d)
		return;
	$('confirm-text').textContent = isSemaphore(d.kind)
		? `Force-release every permit of semaphore '${d.name}'? Each holder loses its ` +
		  'permit now: their next heartbeat or release answers not_held.'
		: `Force-release ${d.kind} '${d.name}'? Whoever holds it ` +
		  'loses it now: their next heartbeat or release answers not_held.';
	$('confirm').returnValue = '';
	$('confirm').showModal();
}

async function force() {
	const d = state.detail;
	if (!d)
		return;
	const mode = d.status && d.status.mode;
	try {
		const r = await api('DELETE', releasePath(d.kind, d.name, mode));
		if (r.status === 200)
			detailMessage(r.body && r.body.released === false
				      ? 'Nothing to release: it was free already.' : 'Released.');
		else if (r.status === 403)
			detailMessage('Refused: only an admin token may force a release. ' + problem(r),
				      true);
		else
			detailMessage(problem(r), true);
	} catch (err) {
		detailMessage('dlockd cannot be reached: ' + err.message, true);
	}
	refresh();
}

// ----- wiring -----

function start() {
	$('token').value = token();
	$('token-form').addEventListener('submit', (ev) => {
		ev.preventDefault();
		const t = $('token').value.trim();
		if (t)
			sessionStorage.setItem(TOKEN_KEY, t);
		else
			sessionStorage.removeItem(TOKEN_KEY);
		refresh();
		if (state.detail)
			openDetail(state.detail.kind, state.detail.name);
	});
	$('token-forget').addEventListener('click', () => {
		sessionStorage.removeItem(TOKEN_KEY);
		$('token').value = '';
		refresh();
	});
	let typing = null;
	$('prefix').addEventListener('input', () => {
		clearTimeout(typing);
		typing = setTimeout(() => {
			state.prefix = $('prefix').value.trim();
			refresh();
		}, 300);
	});
	$('detail-close').addEventListener('click', closeDetail);
	$('force').addEventListener('click', askForce);
	$('confirm').addEventListener('close', () => {
		if ($('confirm').returnValue === 'release')
			force();
	});
	setInterval(tick, 250);
	refresh();
}

document.addEventListener('DOMContentLoaded', start);
