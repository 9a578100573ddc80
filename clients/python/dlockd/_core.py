"""_core.py -- what the client does, without doing any I/O itself: each
operation (acquire, renew, watch, release) is a generator that yields the
requests and pauses it needs and is sent their results. _sync.py runs them
on threads, _aio.py on an asyncio loop, so both flavours behave alike.

Yielded actions:
  Request(method, path, params, timeout, body=None)
                                          -> an Answer, or Unreachable
      (body: a JSON document sent as the request's body)
  Sleep(seconds)                          -> None
  Wait(seconds, which)                    -> True if woken early ("renew":
      a nudge or a stop; "stop": a stop), False when the time ran out
All times are time.monotonic() seconds: the client's own clock, never the
server's."""
import time
from collections import namedtuple

from .errors import Conflict, Error, NotHeld, Unavailable, error_of

Request = namedtuple("Request", "method path params timeout body", defaults=(None,))
Sleep = namedtuple("Sleep", "seconds")
Wait = namedtuple("Wait", "seconds which")
Answer = namedtuple("Answer", "status body retry_after")
Unreachable = namedtuple("Unreachable", "reason")

# How much of the lease the client keeps for itself: the lease it counts on
# ends this much before the one dlockd times (a client clock slower than
# Redis', a busy machine), as dlock does: 3% of the lease plus 10 ms.
def margin_s(ttl_ms):
    return (ttl_ms * 0.03 + 10) / 1000


def failed(res):
    """Is this result worth retrying: dlockd unreachable, or a 5xx that
    changed nothing (500 internal is a bug: not retried)?"""
    return isinstance(res, Unreachable) or (res.status >= 500 and res.status != 500)


def error(res, what):
    if isinstance(res, Unreachable):
        return Unavailable(f"{what}: {res.reason}", code="unreachable")
    return error_of(res.status, res.body, res.retry_after, what)


def backoff(res, attempt):
    """Seconds before retrying a failed call: Retry-After when dlockd gave
    one, else 250 ms doubling to 2 s."""
    if isinstance(res, Answer) and res.retry_after is not None:
        return max(0.05, float(res.retry_after))
    return min(2.0, 0.25 * (2 ** attempt))


def code(res):
    if isinstance(res, Answer) and isinstance(res.body, dict):
        c = res.body.get("error")
        return c if isinstance(c, str) else ""
    return ""


def message(res):
    if isinstance(res, Answer) and isinstance(res.body, dict):
        m = res.body.get("message")
        return m if isinstance(m, str) else ""
    return ""


def lost_answer(res):
    """Does this answer say the holding (or the session) is gone?"""
    return isinstance(res, Answer) and (
        (res.status == 409 and code(res) in ("not_held", "not_owner"))
        or (res.status == 404 and code(res) == "session_not_found"))


def acquire_steps(cfg, kind, name, owner, ttl_ms, wait_ms, extra=None, session=None):
    """Take the lock: long polls chained up to wait_ms (None: no end), each
    at most cfg.max_poll_ms (halved when dlockd's --max-wait-ms is lower);
    an unreachable dlockd or a 503 retried after Retry-After while the
    deadline and cfg.retry_ms allow; a PUT whose answer was lost sent again
    (the same owner: a repeat of its grant). Returns (fencing_token,
    lease_start, lease_ms): the lease counted from the sending of the
    request that confirmed it. extra: more parameters of the PUT (a
    semaphore's limit and value). session: take it for that session instead
    of with a lease of its own (no ttl_ms sent; owner None: the session id);
    the session's heartbeat renews it, so a late grant is not confirmed
    here. Raises an Error."""
    what = f"{kind.what} '{name}'"
    start = time.monotonic()
    deadline = None if wait_ms is None else start + wait_ms / 1000
    chunk = cfg.max_poll_ms
    first_fail = None
    attempt = 0
    while True:
        now = time.monotonic()
        wait = chunk if deadline is None else max(0, min(chunk, int((deadline - now) * 1000)))
        sent = time.monotonic()
        terms = {"session": session} if session else {"ttl_ms": ttl_ms}
        if owner is not None:
            terms["owner"] = owner
        res = yield Request("PUT", kind.path(name), {**terms, "wait_ms": wait, **(extra or {})},
                            wait / 1000 + cfg.timeout)
        if isinstance(res, Answer) and res.status == 200:
            body = res.body if isinstance(res.body, dict) else {}
            token, lease = body.get("fencing_token"), body.get("ttl_ms")
            if not isinstance(token, int) or not isinstance(lease, int):
                raise Unavailable(f"{what}: dlockd's grant has no fencing_token or ttl_ms",
                                  status=200, body=body)
            if session or time.monotonic() - sent <= ttl_ms / 10000:
                return token, sent, lease
            # Granted long after it was asked (a long poll): the lease began
            # somewhere in between. Renew it at once, so that the lease the
            # client counts on starts at a known moment.
            confirmed = yield from _confirm(cfg, kind, name, owner, ttl_ms, what)
            if confirmed is None:
                continue            # it ran out meanwhile: ask again
            if time.monotonic() >= confirmed[0] + confirmed[1] / 1000 - margin_s(ttl_ms):
                continue            # confirmed too late to count on: ask again
            return (token,) + confirmed
        if isinstance(res, Answer) and res.status == 409 and code(res) == "locked":
            first_fail, attempt = None, 0
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise error(res, what)
            if wait == 0:       # a dlockd that does not wait (--max-wait-ms 0) is polled
                pause = min(1.0, backoff(res, 2))
                if deadline is not None:
                    pause = min(pause, max(0.0, deadline - now))
                yield Sleep(pause)
            continue
        if (isinstance(res, Answer) and res.status == 400 and "wait_ms" in message(res)
                and wait > 0):
            chunk = wait // 2 if wait >= 200 else 0    # dlockd's --max-wait-ms is lower
            continue
        if failed(res):
            now = time.monotonic()
            if first_fail is None:
                first_fail = now
            pause = backoff(res, attempt)
            attempt += 1
            if ((deadline is not None and now + pause > deadline)
                    or now + pause - first_fail > cfg.retry_ms / 1000):
                raise error(res, what)
            yield Sleep(pause)
            continue
        raise error(res, what)


def _confirm(cfg, kind, name, owner, ttl_ms, what):
    """A heartbeat right after a late grant: (lease_start, lease_ms), or
    None when dlockd says it is not held any more."""
    first_fail, attempt = time.monotonic(), 0
    while True:
        sent = time.monotonic()
        res = yield Request("POST", kind.path(name, "/heartbeat"),
                            {"owner": owner, "ttl_ms": ttl_ms}, cfg.timeout)
        if isinstance(res, Answer) and res.status == 200 and isinstance(
                (res.body or {}).get("ttl_ms"), int):
            return sent, res.body["ttl_ms"]
        if lost_answer(res):
            return None
        pause = backoff(res, attempt)
        attempt += 1
        if not failed(res) or time.monotonic() + pause - first_fail > cfg.retry_ms / 1000:
            raise error(res, f"{what}: granted after a wait, but renewing it at once failed")
        yield Sleep(pause)


def renew_steps(held):
    """Keep held's lease (a Held's or a Session's): a heartbeat a third of
    the lease after the sending of the last one dlockd confirmed (at once
    when nudged); a failed one is retried, each waiting no longer than the
    lease the client counts on. The lease is lost at once on not_held,
    not_owner or session_not_found, or when held._dropped finds the answer
    says so (a session's holding dropped), and when no renewal was
    confirmed by its end less the margin. Returns when stopped or lost."""
    ttl_ms = held.ttl_ms
    third = ttl_ms / 3000
    next_at = held._lease_start + third
    attempt = 0
    while True:
        if held._stopping:
            return
        give_up = held._end - held._margin
        now = time.monotonic()
        if now >= give_up:
            held._lose(Unavailable(
                f"{held._what}: no renewal confirmed within the lease "
                f"({held._last_failure or 'no answer'})", code="unreachable"))
            return
        if now < next_at:
            nudged = yield Wait(min(next_at, give_up) - now, "renew")
            if held._stopping:
                return
            if not nudged:
                continue
        sent = time.monotonic()
        if sent >= give_up:
            continue
        path, params = held._heartbeat()
        res = yield Request("POST", path, params, max(0.01, min(max(third, 0.2), give_up - sent)))
        if held._stopping:
            return
        if isinstance(res, Answer) and res.status == 200 and isinstance(
                (res.body or {}).get("ttl_ms"), int):
            gone = held._dropped(res.body)
            if gone:
                held._lose(gone)
                return
            held._renewed(sent, res.body["ttl_ms"])
            next_at, attempt = sent + third, 0
            continue
        if lost_answer(res):
            held._lose(error(res, f"{held._what}: renewing"))
            return
        held._last_failure = str(error(res, "renewing"))
        next_at = time.monotonic() + backoff(res, attempt)
        attempt += 1


def watch_steps(cfg, held):
    """Watch held's lock (GET ?index=&wait_ms=, woken by dlockd's pub/sub):
    when its state changes, nudge the renewer, whose heartbeat then learns
    at once whether the holding is gone (a forced release, say) instead of
    at its next turn. Best effort: the heartbeats are what the loss rests
    on. Returns when stopped or lost."""
    index, chunk = held.fencing_token, min(cfg.max_poll_ms, 60000)
    path = held._kind.status_path(held.name)
    while not held._stopping and not held.lost.is_set() and chunk > 0:
        res = yield Request("GET", path, {"index": index, "wait_ms": chunk},
                            chunk / 1000 + cfg.timeout)
        if held._stopping or held.lost.is_set():
            return
        if isinstance(res, Answer) and res.status == 200 and isinstance(res.body, dict):
            if res.body.get("changed"):
                held._nudge()
            if isinstance(res.body.get("index"), int):
                index = res.body["index"]
            continue
        if isinstance(res, Answer) and res.status == 400 and "wait_ms" in message(res):
            chunk = chunk // 2 if chunk >= 200 else 0
            continue
        yield Wait(1.0, "stop")


def release_steps(cfg, path, params, what):
    """Give one hold back (or end a session): True if released, False if
    nothing was held (a release repeated, a lease that ran out). An
    unreachable dlockd or a 503 is retried for cfg.retry_ms."""
    what += ": releasing"
    first_fail, attempt = time.monotonic(), 0
    while True:
        res = yield Request("DELETE", path, params, cfg.timeout)
        if isinstance(res, Answer) and res.status == 200:
            return True
        if lost_answer(res):
            return False
        pause = backoff(res, attempt)
        attempt += 1
        if not failed(res) or time.monotonic() + pause - first_fail > cfg.retry_ms / 1000:
            raise error(res, what)
        yield Sleep(pause)


def call_steps(cfg, method, path, params, what, body=None):
    """One request of the caller's (status, watch, a session's calls): its
    JSON answer (200 or 201), an unreachable dlockd or a 503 retried for
    cfg.retry_ms (so only for requests that may be repeated)."""
    first_fail, attempt = time.monotonic(), 0
    wait = (body or params).get("wait_ms") or 0
    while True:
        res = yield Request(method, path, params, wait / 1000 + cfg.timeout, body)
        if isinstance(res, Answer) and res.status in (200, 201):
            return res.body
        pause = backoff(res, attempt)
        attempt += 1
        if not failed(res) or time.monotonic() + pause - first_fail > cfg.retry_ms / 1000:
            raise error(res, what)
        yield Sleep(pause)


__all__ = ["Answer", "Unreachable", "Request", "Sleep", "Wait", "acquire_steps",
           "renew_steps", "watch_steps", "release_steps", "call_steps", "margin_s",
           "Conflict", "Error", "NotHeld"]
