// dlockd -- the Node client of dlockd, the distributed lock service over
// HTTP. It takes a lock, keeps its lease alive in the background, aborts
// the held lock's AbortSignal the moment the lease is known lost, and
// gives the lock back on every way out. A session (Session) does the same
// for many locks with one heartbeat. Node 20 built-ins only.
//
// Loss is told at once on a renewal answered not_held (or not_owner), and
// on a watch of the lock's state that no longer shows the holding (a
// force release); when renewals fail, at the lease's end less a margin,
// counted on this process's monotonic clock (performance.now) from the
// sending of the last renewal dlockd confirmed.
import http from 'node:http';
import https from 'node:https';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';

export const DEFAULT_URL = 'http://127.0.0.1:8080';
const MAX_POLL_MS = 300000; // dlockd's default --max-wait-ms; a lower one is followed
const SLACK_MS = 15000; // dlockd answers a call Redis has not answered within 10 s

// What the client knows of each kind: adding a kind of dlockd is a line.
// limited: takes a limit (a semaphore's permits), and the watch asks by
// owner (a semaphore lists its first 100 holders only).
const KINDS = {
  lock: { what: 'lock', resource: (n) => `/locks/${n}`, status: (n) => `/locks/${n}`, side: '' },
  fair: { what: 'fair lock', resource: (n) => `/fairlocks/${n}`, status: (n) => `/fairlocks/${n}`, side: '' },
  read: { what: 'read lock', resource: (n) => `/rwlocks/${n}/read`, status: (n) => `/rwlocks/${n}`, side: 'read' },
  write: { what: 'write lock', resource: (n) => `/rwlocks/${n}/write`, status: (n) => `/rwlocks/${n}`, side: 'write' },
  semaphore: { what: 'semaphore', resource: (n) => `/semaphores/${n}`, status: (n) => `/semaphores/${n}`, side: '', limited: true },
};

function kindOf(kind = 'lock') {
  const k = KINDS[kind];
  if (!k) throw new TypeError(`dlockd: unknown kind '${kind}' (${Object.keys(KINDS).join(', ')})`);
  return k;
}

/** An answer of dlockd that is not a success, with its JSON error code. */
export class DlockdError extends Error {
  constructor(status, code, message, { retryAfterMs = 0, cause } = {}) {
    super(status ? `dlockd: ${status} ${code}: ${message}` : `dlockd: ${message}`,
      cause ? { cause } : undefined);
    this.name = this.constructor.name;
    this.status = status; // 0 when no answer came
    this.code = code; // "locked", "not_held", ..., "unreachable", "timeout", "aborted"
    this.retryAfterMs = retryAfterMs;
  }
}
/** Not acquired: held by another within the wait (409 locked), or the wait was aborted. */
export class ConflictError extends DlockdError {}
/** Not (or no longer) held by this owner: 409 not_held or not_owner; 404 session_not_found (the session ended). */
export class NotHeldError extends DlockdError {}
/** 401 unauthorized or 403 forbidden. */
export class UnauthorizedError extends DlockdError {}
/** dlockd unreachable, or 503, for longer than the call could retry. */
export class UnavailableError extends DlockdError {}
/** A semaphore asked with another limit than the one in force (409 limit_mismatch); limit is that one. */
export class LimitMismatchError extends DlockdError {
  constructor(status, code, message, options = {}) {
    super(status, code, message, options);
    this.limit = options.limit;
  }
}
/** The lease was lost: the reason of a held lock's aborted signal. */
export class LostError extends Error {
  constructor(message, cause) {
    super(message, cause ? { cause } : undefined);
    this.name = 'LostError';
  }
}

function errorOf(status, body, retryAfterMs) {
  const code = (body && typeof body === 'object' && body.error) || `http_${status}`;
  const message = (body && typeof body === 'object' && body.message) || String(body ?? '');
  const C = code === 'locked' || code === 'too_many_holds' ? ConflictError
    : code === 'not_held' || code === 'not_owner' || code === 'session_not_found' ? NotHeldError
      : code === 'limit_mismatch' ? LimitMismatchError
        : status === 401 || status === 403 ? UnauthorizedError
          : status === 503 ? UnavailableError : DlockdError;
  const err = new C(status, code, message, { retryAfterMs, limit: body?.limit });
  if (body?.lock) err.lock = body.lock; // a multi-lock's: the lock in the way
  return err;
}

// dlockd's certificate was refused: no retry will do better
const TLS_REFUSED = new Set(['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_GET_ISSUER_CERT',
  'ERR_TLS_CERT_ALTNAME_INVALID', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);

const unreachable = (cause) =>
  new UnavailableError(0, 'unreachable', `unreachable: ${cause?.code ?? cause?.message ?? cause}`, { cause });

const now = () => performance.now();

// sleep ms, or until signal aborts (false then)
function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const done = (v) => { clearTimeout(t); signal?.removeEventListener('abort', onAbort); resolve(v); };
    const onAbort = () => done(false);
    const t = setTimeout(() => done(true), Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function checkLimit(k, limit) {
  if (k.limited && !(Number.isInteger(limit) && limit >= 1)) {
    throw new TypeError(`dlockd: a ${k.what} needs a limit of 1 or more, not ${limit}`);
  }
  if (!k.limited && limit !== undefined) throw new TypeError(`dlockd: a ${k.what} takes no limit`);
}

function newOwner() {
  const host = hostname().replace(/[^A-Za-z0-9.-]/g, '_').slice(0, 64);
  return `node-${host}-${process.pid}-${randomBytes(8).toString('hex')}`;
}

export class Client {
  /**
   * @param {object} [options] url (default $DLOCKD_URL, else DEFAULT_URL),
   *   token (default $DLOCKD_TOKEN), ca, cert, key (https: a private CA,
   *   a client certificate for mutual TLS), retryForMs (default 10000).
   */
  constructor({ url, token, ca, cert, key, retryForMs = 10000 } = {}) {
    this.url = new URL(url || process.env.DLOCKD_URL || DEFAULT_URL);
    this.token = token ?? process.env.DLOCKD_TOKEN ?? '';
    this.retryForMs = retryForMs;
    this.pollMs = MAX_POLL_MS;
    const secure = this.url.protocol === 'https:';
    this.mod = secure ? https : http;
    this.agent = secure
      ? new https.Agent({ keepAlive: true, ca, cert, key })
      : new http.Agent({ keepAlive: true });
  }

  /** Closes idle connections (the client stays usable). */
  close() { this.agent.destroy(); }

  // One request: resolves {status, body, retryAfterMs}; rejects with no answer.
  _call(method, path, { query, body, signal, timeoutMs } = {}) {
    const u = new URL(this.url.pathname.replace(/\/$/, '') + path, this.url);
    for (const [k, v] of Object.entries(query ?? {})) u.searchParams.set(k, String(v));
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers = {};
    if (data !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = Buffer.byteLength(data);
    }
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    const signals = [signal, timeoutMs ? AbortSignal.timeout(timeoutMs) : null].filter(Boolean);
    return new Promise((resolve, reject) => {
      const req = this.mod.request(u, {
        method, headers, agent: this.agent,
        signal: signals.length ? AbortSignal.any(signals) : undefined,
      }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          let parsed = text;
          try { parsed = JSON.parse(text); } catch { /* not JSON: kept as text */ }
          const ra = Number.parseInt(res.headers['retry-after'] ?? '', 10);
          resolve({
            status: res.statusCode, body: parsed, retryAfterMs: Number.isNaN(ra) ? 0 : ra * 1000,
            contentType: res.headers['content-type'],
          });
        });
      });
      req.on('error', reject);
      req.end(data);
    });
  }

  _pollFor(ms) { return Math.max(0, Math.min(Math.floor(ms), this.pollMs)); }

  // Follows a dlockd whose --max-wait-ms is below what was asked (400
  // invalid_argument about wait_ms, "out of range 0..N").
  _learnPoll(err, asked) {
    if (err.code !== 'invalid_argument' || !/wait_ms/.test(err.message) || asked === 0) return false;
    const m = /out of range \d+\.\.(\d+)/.exec(err.message);
    const max = m ? Number(m[1]) : NaN;
    this.pollMs = max < asked ? max : Math.floor(asked / 2);
    return true;
  }

  /**
   * Takes the lock name and keeps it until release(). options: kind
   * ('lock', 'fair', 'read', 'write', 'semaphore'), limit (a semaphore's
   * permits, which it needs), ttlMs (default 15000), waitMs
   * (default: until signal aborts; 0: fail at once if held), owner
   * (default: unique to this acquire), signal (aborts the wait, giving
   * back a queue place or anything granted meanwhile).
   * @returns {Promise<HeldLock>}
   */
  async acquire(name, { kind = 'lock', limit, ttlMs = 15000, waitMs, owner, signal } = {}) {
    const k = kindOf(kind);
    checkLimit(k, limit);
    const ownerGiven = owner !== undefined;
    owner ??= newOwner();
    const path = k.resource(encodeURIComponent(name));
    const giveBack = () => (ownerGiven ? undefined : this._giveBack(path, owner));
    return this._take(path, `${k.what} '${name}'`, (pollMs) => ({
      owner, ttl_ms: ttlMs, wait_ms: pollMs, ...(k.limited ? { limit } : {}),
    }), {
      waitMs,
      signal,
      giveBack,
      granted: async (a, sent) => {
        const held = new HeldLock(this, k, name, path, owner, a.body.fencing_token, ttlMs);
        // a grant late in its poll: its lease may have begun long before
        // this clock can vouch for; renew it at once
        if (now() - sent <= ttlMs / 10) {
          held._start(sent);
          return held;
        }
        const hsent = now();
        if (await held._heartbeat(signal, ttlMs / 3) === null) {
          held._start(hsent);
          return held;
        }
        await giveBack();
        return undefined; // lost already, or unknown: try again
      },
    });
  }

  // PUTs body(pollMs) to path until granted(answer, sent) resolves to
  // something other than undefined: long polls chained for waitMs (or
  // until signal aborts, then giveBack() and a ConflictError), 503s and
  // lost answers retried for retryForMs, a lower --max-wait-ms followed.
  async _take(path, what, body, { waitMs, signal, giveBack, granted }) {
    const waitEnd = waitMs === undefined ? Infinity : now() + waitMs;
    let outage = 0; // when dlockd began to be unavailable
    let last = null;
    for (;;) {
      const t0 = now();
      const pollMs = this._pollFor(Math.min(waitEnd - t0, MAX_POLL_MS));
      let a;
      let err = null;
      const sent = now();
      try {
        a = await this._call('PUT', path, { body: body(pollMs), signal, timeoutMs: pollMs + SLACK_MS });
      } catch (e) {
        err = unreachable(e);
      }
      if (signal?.aborted) {
        await giveBack?.(); // the grant may be on its way
        const timeout = signal.reason?.name === 'TimeoutError';
        throw new ConflictError(0, timeout ? 'timeout' : 'aborted',
          `${what} not acquired: the wait was ${timeout ? 'timed out' : 'aborted'}`, { cause: signal.reason });
      }
      if (err && TLS_REFUSED.has(err.cause?.code)) throw err; // sent again, it would be refused again
      if (!err && a.status === 200) {
        const got = await granted(a, sent);
        if (got !== undefined) return got;
        continue;
      }
      if (!err) err = errorOf(a.status, a.body, a.retryAfterMs);
      if (err instanceof UnavailableError) {
        outage ||= t0;
        const giveUp = Math.max(outage + this.retryForMs, waitEnd === Infinity ? 0 : waitEnd);
        const next = err.retryAfterMs || 200;
        if (now() + next > giveUp) throw err;
        await sleep(next, signal);
        continue;
      }
      outage = 0;
      if (this._learnPoll(err, pollMs)) continue;
      if (!(err instanceof ConflictError) || err.code !== 'locked') throw err;
      last = err;
      if (now() >= waitEnd) throw last;
      if (pollMs === 0) await sleep(Math.min(last.retryAfterMs || 1000, 1000), signal);
    }
  }

  // One call, retried on no answer and on 503 (after Retry-After) for
  // retryForMs; resolves to the 200 answer's body, rejects with the error.
  async _retried(method, path, options) {
    const giveUp = now() + this.retryForMs;
    for (;;) {
      let err;
      try {
        const a = await this._call(method, path, options);
        if (a.status === 200 || a.status === 201) return a.body;
        err = errorOf(a.status, a.body, a.retryAfterMs);
      } catch (e) {
        err = unreachable(e);
      }
      const next = err.retryAfterMs || 200;
      if (!(err instanceof UnavailableError) || now() + next > giveUp) throw err;
      await sleep(next);
    }
  }

  /**
   * Makes a session (POST /sessions): one lease and one heartbeat for
   * every lock taken for it, renewed in the background until close().
   * options: ttlMs (default 15000), name (for humans), value.
   * @returns {Promise<Session>}
   */
  async session({ ttlMs = 15000, name, value } = {}) {
    const sent = now();
    const a = await this._retried('POST', '/sessions', {
      body: { ttl_ms: ttlMs, ...(name !== undefined ? { name } : {}), ...(value !== undefined ? { value } : {}) },
      timeoutMs: SLACK_MS,
    });
    const session = new Session(this, a.session, a.ttl_ms ?? ttlMs);
    session._tasks.push(session._renew(sent));
    return session;
  }

  /**
   * Runs fn(signal, session) in a new session; signal aborts the moment
   * the session is lost (or options.signal aborts). Ends the session,
   * releasing all it holds, however fn ends. Resolves to fn's value;
   * rejects with fn's error, else a LostError if the session was lost.
   */
  async withSession(fn, options = {}) {
    const session = await this.session(options);
    const signal = options.signal ? AbortSignal.any([session.signal, options.signal]) : session.signal;
    let value;
    try {
      value = await fn(signal, session);
    } finally {
      await session.close().catch(() => {});
    }
    if (session.lostError) throw session.lostError;
    return value;
  }

  async _giveBack(path, owner) {
    try {
      await this._call('DELETE', path, { query: { owner }, timeoutMs: 2000 });
    } catch { /* dlockd takes back a grant whose client hung up, and the lease ends */ }
  }

  /**
   * Runs fn(signal, held) holding the lock; signal aborts the moment the
   * lease is lost (or options.signal aborts). Releases however fn ends,
   * exceptions included. Resolves to fn's value; rejects with fn's
   * error, else a LostError if the lease was lost.
   */
  async withLock(name, fn, options = {}) {
    const held = await this.acquire(name, options);
    const signal = options.signal ? AbortSignal.any([held.signal, options.signal]) : held.signal;
    let value;
    try {
      value = await fn(signal, held);
    } finally {
      await held.release().catch(() => {});
    }
    if (held.lostError) throw held.lostError;
    return value;
  }

  /**
   * Takes one of the limit permits of semaphore name and keeps it until
   * release(): acquire(name, {...options, kind: 'semaphore', limit}).
   * Another limit than the one in force rejects with a LimitMismatchError.
   * @returns {Promise<HeldLock>}
   */
  semaphore(name, limit, options = {}) {
    return this.acquire(name, { ...options, kind: 'semaphore', limit });
  }

  /** The lock's state (GET): {name, locked, ttl_ms, index, holders, ...}. */
  async status(name, { kind = 'lock', signal } = {}) {
    let a;
    try {
      a = await this._call('GET', kindOf(kind).status(encodeURIComponent(name)), { signal, timeoutMs: SLACK_MS });
    } catch (e) {
      throw unreachable(e);
    }
    if (a.status !== 200) throw errorOf(a.status, a.body, a.retryAfterMs);
    return a.body;
  }

  /**
   * Waits until the state's index differs from index (taken, released,
   * lease ended) and resolves to the new state; long polls are chained,
   * 503s retried. Rejects when signal aborts.
   */
  async watch(name, index, { kind = 'lock', signal } = {}) {
    const path = kindOf(kind).status(encodeURIComponent(name));
    for (;;) {
      try {
        const st = await this._watchOnce(path, index, signal);
        if (st.index !== index) return st;
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        if (!(e instanceof UnavailableError)) throw e;
        await sleep(e.retryAfterMs || 1000, signal);
      }
    }
  }

  // One long poll; asked by owner when owner is given.
  async _watchOnce(path, index, signal, owner) {
    for (;;) {
      const waitMs = this._pollFor(MAX_POLL_MS);
      let a;
      try {
        const query = { index, wait_ms: waitMs, ...(owner ? { owner } : {}) };
        a = await this._call('GET', path, { query, signal, timeoutMs: waitMs + SLACK_MS });
      } catch (e) {
        throw unreachable(e);
      }
      if (a.status !== 200) {
        const err = errorOf(a.status, a.body, a.retryAfterMs);
        if (this._learnPoll(err, waitMs)) continue;
        throw err;
      }
      if (waitMs === 0 && a.body.index === index) await sleep(1000, signal); // a dlockd that does not wait
      return a.body;
    }
  }
}

// Asked by owner (a semaphore), past the holders listed (its first 100),
// dlockd's held_by_owner is false too: nothing is known, the renewal
// tells a loss then.
const holds = (st, owner, side) => st.held_by_owner === true
  || (st.holders ?? []).some((h) => h.owner === owner && (!side || h.side === side))
  || (st.held_by_owner === false && (st.holders ?? []).length < st.held);

// What a held lock and a session share: a lease renewed every third of
// its ttl by _heartbeat(signal, ms) (null when renewed, else the error;
// a NotHeldError means lost), and lost, its signal aborted, when dlockd
// says so or when no renewal was confirmed by the lease's end less a
// margin, counted from the sending of the last one confirmed.
class Lease {
  constructor(client, ttlMs, what) {
    this.client = client;
    this.ttlMs = ttlMs;
    this.marginMs = ttlMs / 20 + 20;
    this._what = what;
    this._holder = new AbortController(); // the holder's: aborted on loss and release
    this._bg = new AbortController(); // the renewer's (and a lock's watcher's)
    this._held = true;
    this._released = null;
    this.lostError = null;
    this._tasks = [];
  }

  /** Aborted the moment the lease is known lost (reason: a LostError), and at release. */
  get signal() { return this._holder.signal; }

  /**
   * Whether the lease is still this holder's: false for good after a loss
   * or release. It reads the clock too: a body that runs synchronously
   * past the lease (no timer of the renewer can run then), or a process
   * paused past it, sees false, and the loss is told then.
   */
  get held() {
    if (this._held && this._vouched !== undefined && now() >= this._vouched) {
      this._lose('no renewal confirmed within the lease');
    }
    return this._held;
  }

  _lose(why, cause) {
    if (!this._held) return;
    this._held = false;
    this.lostError = new LostError(`dlockd: ${this._what}: the lease was lost: ${why}`, cause);
    this._holder.abort(this.lostError);
    this._bg.abort();
  }

  async _renew(confirmed) {
    const bg = this._bg.signal;
    let next = confirmed + this.ttlMs / 3;
    for (;;) {
      const end = confirmed + this.ttlMs - this.marginMs; // the lease this clock can vouch for
      this._vouched = end;
      if (!await sleep(Math.min(next, end) - now(), bg)) return;
      if (now() >= end) return this._lose('no renewal confirmed within the lease');
      const sent = now();
      const err = await this._heartbeat(bg, Math.min(this.ttlMs / 3, end - sent));
      if (bg.aborted) return;
      if (err === null) {
        confirmed = sent;
        next = sent + this.ttlMs / 3;
      } else if (err instanceof NotHeldError) {
        return this._lose(`dlockd says ${err.code}: ${err.message}`, err);
      } else {
        next = now() + Math.min(this.ttlMs / 10, err.retryAfterMs || Infinity, 1000);
      }
    }
  }

  // Stops the renewals (none is sent after it), then sends method path
  // (retried as Client._retried does); a NotHeldError after a loss is no
  // error. The holder's signal is aborted at the end.
  async _end(path, query) {
    void this.held; // a lease that ran out by the clock is lost: the scope says so
    const wasLost = this.lostError !== null;
    this._held = false;
    this._bg.abort();
    await Promise.allSettled(this._tasks);
    try {
      return await this.client._retried('DELETE', path, { query, timeoutMs: SLACK_MS });
    } catch (err) {
      if (!(err instanceof NotHeldError && wasLost)) throw err;
      return undefined;
    } finally {
      this._holder.abort(new Error('dlockd: released'));
    }
  }
}

/** A held lock: its signal aborts the moment the lease is known lost. */
export class HeldLock extends Lease {
  constructor(client, kind, name, path, owner, fencingToken, ttlMs) {
    super(client, ttlMs, `${kind.what} '${name}'`);
    this.kind = kind;
    this.name = name;
    this.owner = owner;
    this.fencingToken = fencingToken;
    this._path = path;
  }

  _start(confirmed) {
    this._tasks.push(this._renew(confirmed), this._watch());
  }

  // One renewal, answered within ms: null when renewed, else the error.
  async _heartbeat(signal, ms) {
    try {
      const a = await this.client._call('POST', `${this._path}/heartbeat`, {
        body: { owner: this.owner, ttl_ms: this.ttlMs }, signal, timeoutMs: Math.max(1, Math.floor(ms)),
      });
      return a.status === 200 ? null : errorOf(a.status, a.body, a.retryAfterMs);
    } catch (e) {
      return unreachable(e);
    }
  }

  async _watch() {
    const bg = this._bg.signal;
    const path = this.kind.status(encodeURIComponent(this.name));
    let index = this.fencingToken;
    while (!bg.aborted) {
      let st;
      try {
        st = await this.client._watchOnce(path, index, bg, this.kind.limited ? this.owner : undefined);
      } catch (e) {
        if (bg.aborted) return;
        if (e.status === 400 || e.status === 401 || e.status === 403) return; // the renewer still tells
        await sleep(e.retryAfterMs || 1000, bg);
        continue;
      }
      if (bg.aborted) return;
      if (!holds(st, this.owner, this.kind.side)) {
        return this._lose('dlockd no longer shows it held (released by force, or its lease ended)');
      }
      index = st.index;
    }
  }

  /**
   * Gives the lock back after stopping the renewals (none is sent after
   * it); retried on 503 and on no answer for the client's retryForMs. A
   * lost lock is released too, in case dlockd still has it: its not_held
   * is no error then. A second call returns the first one's promise.
   */
  release() {
    this._released ??= this._end(this._path, { owner: this.owner }).then(() => undefined);
    return this._released;
  }

  /** `await using held = await client.acquire(...)` releases at the block's end. */
  [Symbol.asyncDispose]() { return this.release(); }
}

// A session's holding as dlockd lists it.
const holdingOf = (h) => ({ kind: h.kind, name: h.name, owner: h.owner, fencingToken: h.fencing_token });

/**
 * A session: one lease and one heartbeat for every lock taken for it.
 * Lost, its signal aborted, when a heartbeat answers 404 (the session
 * ended: everything it held is released), when a heartbeat reports a
 * holding dropped (released or taken by force), or when no heartbeat was
 * confirmed by the lease's end less a margin.
 */
export class Session extends Lease {
  constructor(client, id, ttlMs) {
    super(client, ttlMs, `session '${id}'`);
    this.id = id;
    this._path = `/sessions/${encodeURIComponent(id)}`;
  }

  async _heartbeat(signal, ms) {
    let a;
    try {
      a = await this.client._call('POST', `${this._path}/heartbeat`, {
        signal, timeoutMs: Math.max(1, Math.floor(ms)),
      });
    } catch (e) {
      return unreachable(e);
    }
    if (a.status !== 200) return errorOf(a.status, a.body, a.retryAfterMs);
    const dropped = a.body?.dropped ?? [];
    if (dropped.length === 0) return null;
    const names = dropped.map((h) => `${h.kind} '${h.name}'`).join(', ');
    return new NotHeldError(200, 'dropped', `the session no longer holds ${names}`);
  }

  /**
   * Takes a lock for the session: it lives as long as the session, which
   * renews it. options: kind, limit (a semaphore's), waitMs (default:
   * until signal aborts; 0: fail at once if held), owner (default the
   * session id), signal. Resolves to {kind, name, owner, fencingToken}.
   */
  async acquire(name, { kind = 'lock', limit, waitMs, owner, signal } = {}) {
    const k = kindOf(kind);
    checkLimit(k, limit);
    const a = await this.client._take(k.resource(encodeURIComponent(name)), `${k.what} '${name}'`, (pollMs) => ({
      session: this.id, wait_ms: pollMs, ...(owner !== undefined ? { owner } : {}), ...(k.limited ? { limit } : {}),
    }), { waitMs, signal, granted: (answer) => answer });
    return { kind, name, owner: a.body.owner ?? owner ?? this.id, fencingToken: a.body.fencing_token };
  }

  /**
   * Takes every lock of locks ([{kind, name, limit?}]) for the session, or
   * none: waits up to waitMs (default: until signal aborts) for the whole
   * set, then rejects with a ConflictError whose lock names the one in
   * the way, holding nothing this call took. Resolves to each holding,
   * {kind, name, owner, fencingToken}, sorted by kind, then name.
   */
  async acquireAll(locks, { waitMs, signal } = {}) {
    const a = await this.client._take(`${this._path}/locks`, `locks ${locks.map((l) => `'${l.name}'`).join(', ')}`,
      (pollMs) => ({ locks, wait_ms: pollMs }), { waitMs, signal, granted: (answer) => answer });
    return a.body.holdings.map(holdingOf);
  }

  /** What the session holds now (GET): [{kind, name, owner, fencingToken}]. */
  async holdings() {
    const body = await this.client._retried('GET', this._path, { timeoutMs: SLACK_MS });
    return body.holdings.map(holdingOf);
  }

  /**
   * Ends the session (DELETE) after stopping the heartbeats: everything it
   * holds is released, its waiters served at once. A session already
   * ended (404) is no error: lostError tells it. A second call returns
   * the first one's promise.
   */
  close() {
    this._released ??= this._close();
    return this._released;
  }

  async _close() {
    try {
      await this._end(this._path);
    } catch (err) {
      if (err.code !== 'session_not_found') throw err;
      this.lostError ??= new LostError(`dlockd: ${this._what}: the lease was lost: dlockd says ${err.code}`, err);
    }
  }

  /** `await using session = await client.session(...)` ends it at the block's end. */
  [Symbol.asyncDispose]() { return this.close(); }
}
