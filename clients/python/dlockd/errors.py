"""errors.py -- the exceptions of the dlockd client: one class per kind of
answer a caller handles differently, each carrying dlockd's JSON error code
(`code`), its `message`, the HTTP `status` (0: dlockd was not reached) and
the whole JSON `body`."""


class Error(Exception):
    """Anything dlockd refused, or could not be asked."""

    def __init__(self, message, *, status=0, code="", body=None, retry_after=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body = body or {}
        self.retry_after = retry_after


class InvalidArgument(Error):
    """400 (a bad name, owner or number), 404, 405, 413: fix the call."""


class Unauthorized(Error):
    """401: no bearer token, or one dlockd does not know."""


class Forbidden(Error):
    """403: the token may not touch this name, or may not force a release."""


class Conflict(Error):
    """409 locked: another owner holds it; not acquired within wait_ms."""


Timeout = Conflict  # what a wait that ran out is called elsewhere


class NotHeld(Error):
    """409 not_held: the lease ran out or the lock was released."""


class NotOwner(NotHeld):
    """409 not_owner: another owner (or another token) holds it now."""


class WrongKind(Error):
    """409 wrong_kind: the name is in use as another kind of lock."""


class LimitMismatch(Error):
    """409 limit_mismatch: a semaphore acquired with another limit than the
    one in force, which is `limit` (an int, or None if dlockd gave none).
    Nothing was changed."""

    def __init__(self, message, **kw):
        super().__init__(message, **kw)
        limit = self.body.get("limit")
        self.limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else None


class TooManyHolds(Error):
    """409 too_many_holds: a read hold past dlockd's caps; session_full: a
    session's holdings past --max-session-holdings; too_many_sessions: a
    token's open sessions past --max-sessions-per-token (the cap is
    body["limit"])."""


class Unavailable(Error):
    """503, or dlockd could not be reached (status 0, code "unreachable"):
    retried after Retry-After within the call's deadline before this is
    raised; the call changed nothing (or, for an acquire, what it may have
    taken was given back)."""


class Internal(Error):
    """500 internal: a bug in dlockd; retrying will not help."""


class SessionNotFound(NotHeld):
    """404 session_not_found: the session never existed, was ended, or its
    lease ran out; everything it held is released."""


class LeaseLost(Error):
    """The lease was lost while the body ran: the scoped forms raise it when
    the body ends (the asyncio form cancels the body first)."""


_BY_CODE = {
    "locked": Conflict,
    "not_held": NotHeld,
    "not_owner": NotOwner,
    "wrong_kind": WrongKind,
    "too_many_holds": TooManyHolds,
    "session_full": TooManyHolds,
    "too_many_sessions": TooManyHolds,
    "session_not_found": SessionNotFound,
    "limit_mismatch": LimitMismatch,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "internal": Internal,
    "backend_unavailable": Unavailable,
    "overloaded": Unavailable,
    "replication_unconfirmed": Unavailable,
}


def error_of(status, body, retry_after=None, what=""):
    """The exception for an error answer of dlockd."""
    body = body if isinstance(body, dict) else {}
    code = body.get("error", "") if isinstance(body.get("error"), str) else ""
    message = body.get("message") or f"dlockd answered {status}"
    cls = _BY_CODE.get(code)
    if cls is None:
        if status == 401:
            cls = Unauthorized
        elif status == 403:
            cls = Forbidden
        elif status == 500:
            cls = Internal
        elif status >= 500:
            cls = Unavailable
        elif 400 <= status < 500 and status != 409:
            cls = InvalidArgument
        else:
            cls = Error
    text = f"{what}: {message}" if what else message
    return cls(text, status=status, code=code, body=body, retry_after=retry_after)
