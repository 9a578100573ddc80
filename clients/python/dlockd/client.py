"""client.py -- the client: Client (one dlockd), Scope (what c.lock() and
its siblings return: a context manager, sync and async), Held (a holding:
its fencing token, its loss event, its renewal and watch) and Session (one
lease and one heartbeat for the locks taken for it). Held and Session keep
their lease alike (_Lease)."""
import asyncio
import os
import re
import secrets
import socket
import threading
import time
from collections import namedtuple
from urllib.parse import quote

from . import _core
from ._core import margin_s
from ._http import Transport, env, ssl_context
from ._kinds import KINDS
from ._run import LoopSignals, ThreadSignals, run_async, run_sync
from .errors import (Conflict, Error, InvalidArgument, LeaseLost, LimitMismatch, NotHeld,
                     SessionNotFound, Unavailable)

DEFAULT_URL = "http://127.0.0.1:8080"


def new_owner():
    """An owner id unique to one holding: py-<host>-<pid>-<64 random bits>.
    dlockd takes a second PUT of a holder as a repeat, so two holdings
    sharing an owner id would both "hold" the lock."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:60]
    return f"py-{host}-{os.getpid()}-{secrets.token_hex(8)}"


class _Lease:
    """What a Held and a Session share: a lease renewed in the background
    (_core.renew_steps, which asks _heartbeat and _dropped), `lost` set the
    moment it is known lost, and a release that stops the renewal before
    it gives back (_release_steps). _GONE: the error that says dlockd has
    released it already."""

    _GONE = NotHeld

    def __init__(self, client, ttl_ms, start, lease_ms):
        self.client = client
        self.ttl_ms = ttl_ms
        self.lost = threading.Event()
        self.lost_reason = None         # the Error that said so
        self._lock = threading.Lock()
        self._lease_start = start
        self._end = start + lease_ms / 1000
        self._margin = margin_s(ttl_ms)
        self._stopping = False
        self._last_failure = None
        self._signals = None
        self._threads = []
        self._on_lost = []

    @property
    def held(self):
        """True while the lease is renewed and the client's count of it has
        not run out; False from the moment it is lost or released."""
        with self._lock:
            return (not self.lost.is_set() and not self._stopping
                    and time.monotonic() < self._end - self._margin)

    @property
    def lease_deadline(self):
        """time.monotonic() by which the lease ends as the client counts it
        (dlockd's lease, counted from the sending of the last renewal it
        confirmed, less a margin)."""
        with self._lock:
            return self._end - self._margin

    def check(self):
        """Raise LeaseLost if the lease is lost: for a body that wants to
        stop between steps. It reads the clock too, so that a process
        paused past its lease (SIGSTOP, a frozen VM) stops at its first
        check, before the renewal thread has run again."""
        self._ran_out()
        if self.lost.is_set():
            raise LeaseLost(f"{self._what}: the lease is lost: "
                            f"{self.lost_reason}", code=getattr(self.lost_reason, "code", ""),
                            status=getattr(self.lost_reason, "status", 0)) from self.lost_reason

    def _ran_out(self):
        """Lose the lease if it ran out as the client counts it, whether or
        not the renewal thread has seen that yet."""
        with self._lock:
            over = (not self.lost.is_set() and not self._stopping
                    and time.monotonic() >= self._end - self._margin)
        if over:
            self._lose(Unavailable(
                f"{self._what}: the lease ran out before a renewal was confirmed "
                f"({self._last_failure or 'none was answered in time'})", code="unreachable"))

    # ----- told by the renewal and the watch -----

    def _renewed(self, sent, lease_ms):
        with self._lock:
            if not self.lost.is_set():
                self._end = sent + lease_ms / 1000

    def _lose(self, err):
        with self._lock:
            if self.lost.is_set() or self._stopping:
                return
            self.lost_reason = err
            self.lost.set()
        self._signals.stop()
        for callback in self._on_lost:
            callback()

    def _nudge(self):
        self._signals.nudge()

    def _lost_by_answer(self):
        return isinstance(self.lost_reason, self._GONE)

    def _dropped(self, body):
        """The Error a 200 heartbeat answer means (None: renewed)."""
        return None

    # ----- threads -----

    def _start(self):
        self._signals = ThreadSignals()
        for role, gen in self._jobs():
            t = threading.Thread(target=run_sync, args=(gen, self.client._transport, self._signals),
                                 name=f"dlockd-{role}-{self._what}", daemon=True)
            t.start()
            self._threads.append(t)

    def _begin_release(self):
        """Stop the renewal (once): True if this call did. A lease that ran
        out before is lost, so that the scope says the body did not run
        inside it."""
        self._ran_out()
        with self._lock:
            if self._stopping:
                return False
            self._stopping = True
        self._signals.stop()
        return True

    def release(self):
        """Stop renewing, then give the hold back (once; later calls do
        nothing). True if dlockd released it, False if it was not held any
        more. No heartbeat is sent once this has begun."""
        if not self._begin_release():
            return False
        for t in self._threads:
            t.join()
        if self._lost_by_answer():
            return False
        return run_sync(self._release_steps(), self.client._transport)

    def __enter__(self):
        return self

    def __exit__(self, et, e, tb):
        return _exit(self, et)


class Held(_Lease):
    """A lock held (or a semaphore's permit, with its `limit`):
    `fencing_token` (int), `lost` (a threading.Event set the moment the
    lease is known lost; never cleared), `held` (False once lost or
    released). Its lease is renewed in the background until release()."""

    def __init__(self, client, kind, name, owner, ttl_ms, token, start, lease_ms):
        super().__init__(client, ttl_ms, start, lease_ms)
        self.kind = kind.key
        self.name = name
        self.owner = owner
        self.fencing_token = token
        self.limit = None               # a semaphore's limit
        self._kind = kind
        self._what = f"{kind.what} '{name}'"

    def __repr__(self):
        state = "lost" if self.lost.is_set() else "released" if self._stopping else "held"
        return f"<dlockd.Held {self._kind.what} {self.name!r} token={self.fencing_token} {state}>"

    def _heartbeat(self):
        return self._kind.path(self.name, "/heartbeat"), {"owner": self.owner, "ttl_ms": self.ttl_ms}

    def _release_steps(self):
        return _core.release_steps(self.client, self._kind.path(self.name), {"owner": self.owner},
                                   self._what)

    def _jobs(self):
        jobs = [("renew", _core.renew_steps(self))]
        if self.client.watch_held:
            jobs.append(("watch", _core.watch_steps(self.client, self)))
        return jobs

    # ----- asyncio -----

    def _astart(self):
        self._signals = LoopSignals()
        transport = self.client._transport
        for _, gen in self._jobs():
            self._signals.tasks.append(
                asyncio.get_running_loop().create_task(run_async(gen, transport, self._signals)))

    async def arelease(self):
        """release() for a holding taken with `async with`."""
        if not self._begin_release():
            return False
        for task in self._signals.tasks:
            task.cancel()
        await asyncio.gather(*self._signals.tasks, return_exceptions=True)
        if self._lost_by_answer():
            return False
        return await run_async(self._release_steps(), self.client._transport)


def _exit(held, et):
    """The end of a scoped holding: release, then say whether the body ran
    inside the lease. A body that raised keeps its exception."""
    try:
        held.release()
    except Error:
        if et is None and not held.lost.is_set():
            raise
    if held.lost.is_set() and et is None:
        held.check()
    return False


class Scope:
    """What c.lock(name, ...) returns: `with` it (or `async with` it) to hold
    the lock for the body, or call acquire() for a Held to release()."""

    def __init__(self, client, kind, name, ttl_ms, wait_ms, owner, extra=None):
        if not isinstance(ttl_ms, int) or ttl_ms < 1:
            raise InvalidArgument(f"ttl_ms must be a positive integer, not {ttl_ms!r}")
        if wait_ms is not None and (not isinstance(wait_ms, int) or wait_ms < 0):
            raise InvalidArgument(f"wait_ms must be a non-negative integer or None, not {wait_ms!r}")
        if kind.takes_limit and not isinstance((extra or {}).get("limit"), int):
            raise InvalidArgument(f"a {kind.what} is acquired with its limit")
        self.client = client
        self.kind = kind
        self.name = name
        self.ttl_ms = ttl_ms
        self.wait_ms = wait_ms
        self.owner = owner
        self.extra = extra or {}    # more PUT parameters: a semaphore's limit, value
        self._held = None
        self._task = None

    def _steps(self, owner):
        return _core.acquire_steps(self.client, self.kind, self.name, owner, self.ttl_ms,
                                   self.wait_ms, self.extra)

    def _new_held(self, owner, token, start, lease):
        held = Held(self.client, self.kind, self.name, owner, self.ttl_ms, token, start, lease)
        held.limit = self.extra.get("limit")     # a semaphore's; None for the locks
        return held

    def _give_back(self, owner, err):
        # Gives back what an interrupted or failed acquire may have been
        # granted (a hold, or a fair-queue place: dlockd drops that on the
        # hang-up already). A release of nothing is a harmless not_held.
        return not isinstance(err, (Conflict, InvalidArgument, LimitMismatch)) and isinstance(
            err, (Error, BaseException))

    def _give_back_steps(self, owner):
        return _core.release_steps(_Once(self.client), self.kind.path(self.name),
                                   {"owner": owner}, f"{self.kind.what} '{self.name}'")

    def acquire(self):
        """Wait for the lock (up to wait_ms; None: no end) and return the Held,
        renewed in the background until its release()."""
        owner = self.owner or new_owner()
        try:
            token, start, lease = run_sync(self._steps(owner), self.client._transport)
        except BaseException as err:        # KeyboardInterrupt included
            if self._give_back(owner, err):
                _quiet(lambda: run_sync(self._give_back_steps(owner), self.client._transport))
            raise
        held = self._new_held(owner, token, start, lease)
        held._start()
        return held

    def __enter__(self):
        self._held = self.acquire()
        return self._held

    def __exit__(self, et, e, tb):
        return _exit(self._held, et)

    async def aacquire(self):
        owner = self.owner or new_owner()
        try:
            token, start, lease = await run_async(self._steps(owner), self.client._transport)
        except BaseException as err:        # CancelledError included
            if self._give_back(owner, err):
                gen = self._give_back_steps(owner)
                try:
                    await asyncio.shield(run_async(gen, self.client._transport))
                except (Error, asyncio.CancelledError):
                    pass
            raise
        held = self._new_held(owner, token, start, lease)
        held._astart()
        return held

    async def __aenter__(self):
        task = asyncio.current_task()
        held = await self.aacquire()
        self._held, self._task = held, task

        def cancel_body():
            held._cancelled_body = True
            task.cancel()
        held._cancelled_body = False
        held._on_lost.append(cancel_body)
        return held

    async def __aexit__(self, et, e, tb):
        held, task = self._held, self._task
        release = asyncio.ensure_future(held.arelease())
        try:
            await asyncio.shield(release)
        except asyncio.CancelledError:
            if not held._cancelled_body:
                raise
            await release           # our own cancel, delivered late
        except Error:
            pass
        if not release.cancelled() and release.exception() and et is None \
                and not held.lost.is_set():
            raise release.exception()
        if held._cancelled_body and task.uncancel() == 0:
            held.check()            # LeaseLost, instead of the CancelledError
        if held.lost.is_set() and et is None:
            held.check()
        return False


Holding = namedtuple("Holding", "kind name owner fencing_token")
Holding.__doc__ = """A lock held for a session: its kind ("lock", "fair",
"read", "write", "semaphore"), name, owner (the session id) and fencing
token. It is released when the session ends."""


def _holdings(body):
    items = body.get("holdings") if isinstance(body, dict) else None
    return [Holding(h.get("kind"), h.get("name"), h.get("owner"), h.get("fencing_token"))
            for h in items or [] if isinstance(h, dict)]


class Session(_Lease):
    """A session of dlockd (c.session()): one lease, renewed by one
    heartbeat in the background, for every lock taken for it; ending it
    (close(), or the end of its `with`) releases them all at once. `id`,
    `lost` (a threading.Event set the moment the session is known lost:
    ended from outside, its lease run out, or a holding of it dropped),
    `held` (False once lost or closed)."""

    _GONE = SessionNotFound

    def __init__(self, client, sid, ttl_ms, name, value, start, lease_ms):
        super().__init__(client, ttl_ms, start, lease_ms)
        self.id = sid
        self.name = name
        self.value = value
        self._what = f"session {sid}"
        self._path = f"/sessions/{quote(sid, safe='')}"

    def __repr__(self):
        state = "lost" if self.lost.is_set() else "ended" if self._stopping else "open"
        return f"<dlockd.Session {self.id} {state}>"

    def _heartbeat(self):
        return self._path + "/heartbeat", {}

    def _dropped(self, body):
        gone = [d for d in body.get("dropped") or [] if isinstance(d, dict)]
        if not gone:
            return None
        names = ", ".join(f"{d.get('kind')} '{d.get('name')}'" for d in gone)
        return NotHeld(f"{self._what}: dlockd dropped {names} (released or taken over)",
                       status=200, code="dropped", body=body)

    def _release_steps(self):
        return _core.release_steps(self.client, self._path, {}, self._what)

    def _jobs(self):
        return [("renew", _core.renew_steps(self))]

    def close(self):
        """End the session: stop the heartbeat, then DELETE it, which
        releases every holding at once (once; later calls do nothing). True
        if dlockd ended it, False if it had ended already."""
        return self.release()

    def _take(self, key, name, wait_ms, extra=None):
        if wait_ms is not None and (not isinstance(wait_ms, int) or wait_ms < 0):
            raise InvalidArgument(f"wait_ms must be a non-negative integer or None, not {wait_ms!r}")
        self.check()
        steps = _core.acquire_steps(self.client, KINDS[key], name, None, self.ttl_ms, wait_ms,
                                    extra, session=self.id)
        token, _, _ = run_sync(steps, self.client._transport)
        return Holding(key, name, self.id, token)

    def lock(self, name, *, wait_ms=None):
        """Take /locks/{name} for the session (wait_ms: None waits as long
        as it takes, 0 tries once): a Holding, or Conflict."""
        return self._take("lock", name, wait_ms)

    def fair_lock(self, name, *, wait_ms=None):
        return self._take("fair", name, wait_ms)

    def read_lock(self, name, *, wait_ms=None):
        return self._take("read", name, wait_ms)

    def write_lock(self, name, *, wait_ms=None):
        return self._take("write", name, wait_ms)

    def semaphore(self, name, limit, *, wait_ms=None):
        _check_limit(limit)
        return self._take("semaphore", name, wait_ms, {"limit": limit})

    def lock_all(self, locks, *, wait_ms=0):
        """Take every lock listed for the session, or none: locks are
        (kind, name) or ("semaphore", name, limit). Waits up to wait_ms
        (0: tries once; at most dlockd's --max-wait-ms) for the whole set.
        Returns a Holding each; Conflict (its body["lock"] names the lock in
        the way) with nothing of this call held."""
        if not isinstance(wait_ms, int) or wait_ms < 0:
            raise InvalidArgument(f"wait_ms must be a non-negative integer, not {wait_ms!r}")
        wanted = []
        for kind, name, *limit in locks:
            wanted.append({"kind": kind, "name": name, **({"limit": limit[0]} if limit else {})})
        self.check()
        body = run_sync(_core.call_steps(self.client, "PUT", self._path + "/locks", {},
                                         f"{self._what}: taking {len(wanted)} locks",
                                         {"locks": wanted, "wait_ms": wait_ms}),
                        self.client._transport)
        return _holdings(body)

    def holdings(self):
        """What the session holds now, as dlockd lists it: a Holding each."""
        return _holdings(run_sync(_core.call_steps(self.client, "GET", self._path, {},
                                                   f"{self._what}: reading it"),
                                  self.client._transport))


class _Once:
    """A client's settings for one try, no retries (giving back on the way
    out of an interrupted acquire must not keep the caller)."""

    def __init__(self, client):
        self.timeout = min(client.timeout, 2.0)
        self.retry_ms = 0
        self.max_poll_ms = client.max_poll_ms


def _quiet(fn):
    try:
        fn()
    except Error:
        pass


def _kind_method(key, doc):
    kind = KINDS[key]

    def method(self, name, *, ttl_ms=15000, wait_ms=None, owner=None):
        return Scope(self, kind, name, ttl_ms, wait_ms, owner)
    method.__name__ = {"lock": "lock", "fair": "fair_lock", "read": "read_lock",
                       "write": "write_lock"}.get(key, key)
    method.__doc__ = doc
    return method


def _check_limit(limit):
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10000:
        raise InvalidArgument(f"limit must be an integer 1..10000, not {limit!r}")


def _semaphore(self, name, limit, *, ttl_ms=15000, wait_ms=None, owner=None, value=None):
    """One of `limit` permits of a semaphore (/semaphores/{name}): see Scope.
    Every acquirer gives the limit; another one than the limit in force
    raises LimitMismatch (its .limit is the one in force). value: text kept
    with the permit, shown to whoever reads the semaphore."""
    _check_limit(limit)
    if value is not None and not isinstance(value, str):
        raise InvalidArgument(f"value must be a str or None, not {value!r}")
    extra = {"limit": limit}
    if value is not None:
        extra["value"] = value
    return Scope(self, KINDS["semaphore"], name, ttl_ms, wait_ms, owner, extra)


class Client:
    """One dlockd. url defaults to $DLOCKD_URL (else http://127.0.0.1:8080),
    token to $DLOCKD_TOKEN. For https://: ca (the PEM file of the CA that
    signed dlockd's certificate; default the system's), cert and key (the
    client certificate, for mutual TLS), or a ready ssl.SSLContext as
    context. timeout: what a request may take beyond the wait it asks for;
    retry_ms: how long an unreachable dlockd or 503s in a row are retried
    (never past a call's own deadline); max_poll_ms: the longest single
    long poll (halved while dlockd refuses it); watch_held: also watch each
    held lock, so that a forced release is known at once."""

    def __init__(self, url=None, token=None, *, ca=None, cert=None, key=None, context=None,
                 timeout=10.0, retry_ms=10000, max_poll_ms=300000, watch_held=True):
        url = url or env("DLOCKD_URL") or DEFAULT_URL
        token = token or env("DLOCKD_TOKEN")
        if url.startswith("https:") and context is None:
            context = ssl_context(ca, cert, key)
        self._transport = Transport(url, token, context)
        self.url = self._transport.url
        self.timeout = timeout
        self.retry_ms = retry_ms
        self.max_poll_ms = max_poll_ms
        self.watch_held = watch_held

    def __repr__(self):
        return f"<dlockd.Client {self.url}>"

    lock = _kind_method("lock", "An exclusive lock (/locks/{name}): see Scope.")
    fair_lock = _kind_method("fair", "A fair lock, first come first served (/fairlocks/{name}).")
    read_lock = _kind_method("read", "The read side of a read-write lock (/rwlocks/{name}/read).")
    write_lock = _kind_method("write", "The write side of a read-write lock (/rwlocks/{name}/write).")
    semaphore = _semaphore

    def status(self, name, *, kind="lock", index=None, wait_ms=None):
        """The lock's state as GET answers it (a dict); with index and
        wait_ms, a long poll that answers when its index differs."""
        params = {}
        if index is not None:
            params["index"] = index
            if wait_ms is not None:
                params["wait_ms"] = wait_ms
        k = KINDS[kind]
        return run_sync(_core.call_steps(self, "GET", k.status_path(name), params,
                                         f"{k.what} '{name}': reading its state"),
                        self._transport)

    def watch(self, name, *, kind="lock", index=None):
        """Yield the lock's state now, then each time it changes (a new
        holder, a release, a lease that ran out): long polls, chained."""
        chunk = self.max_poll_ms
        state = self.status(name, kind=kind, index=index)
        while True:
            if index is None or state.get("changed", True):
                yield state
            index = state.get("index", 0)
            try:
                state = self.status(name, kind=kind, index=index, wait_ms=chunk)
            except InvalidArgument as err:
                if "wait_ms" not in str(err) or chunk < 200:
                    raise
                chunk //= 2
                state = {"changed": False, "index": index}

    def force_release(self, name, *, kind="lock"):
        """Free the lock whoever holds it (an admin token's right; for a
        semaphore, every permit out): True if that released it."""
        k = KINDS[kind]
        body = run_sync(_core.call_steps(self, "DELETE", k.path(name), {"force": "true"},
                                         f"{k.what} '{name}': force release"), self._transport)
        return bool(body and body.get("released"))

    def session(self, *, ttl_ms=15000, name=None, value=None):
        """Make a session (POST /sessions) living ttl_ms, renewed in the
        background until it is closed: `with` it to close it on the way
        out. name (for humans) and value (text) are kept with it."""
        if not isinstance(ttl_ms, int) or ttl_ms < 1:
            raise InvalidArgument(f"ttl_ms must be a positive integer, not {ttl_ms!r}")
        params = {"ttl_ms": ttl_ms, **{k: v for k, v in (("name", name), ("value", value))
                                       if v is not None}}
        sent = time.monotonic()
        body = run_sync(_core.call_steps(self, "POST", "/sessions", params, "making a session"),
                        self._transport)
        sid, lease = (body or {}).get("session"), (body or {}).get("ttl_ms")
        if not isinstance(sid, str) or not isinstance(lease, int):
            raise Unavailable("making a session: dlockd's answer has no session or ttl_ms",
                              status=201, body=body)
        session = Session(self, sid, ttl_ms, name, value, sent, lease)
        session._start()
        return session
