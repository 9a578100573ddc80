"""dlockd -- the Python client of dlockd (distributed locks over HTTP):

    import dlockd
    c = dlockd.Client()                  # $DLOCKD_URL, $DLOCKD_TOKEN
    with c.lock("nightly-report", ttl_ms=15000, wait_ms=30000) as held:
        ...                              # held.fencing_token, held.lost

The lease is renewed in the background; held.lost is set the moment it is
known lost; the lock is released however the body ends. `async with` the
same works on asyncio, where the body is cancelled on loss. c.semaphore(name,
limit) holds one of `limit` permits the same way. c.session(ttl_ms=) is one
lease and one heartbeat for many locks (s.lock(name), s.lock_all([...])).
See README.md."""
from .client import Client, Held, Holding, Scope, Session, new_owner
from .errors import (Conflict, Error, Forbidden, Internal, InvalidArgument, LeaseLost,
                     LimitMismatch, NotHeld, NotOwner, SessionNotFound, Timeout, TooManyHolds,
                     Unauthorized, Unavailable, WrongKind)

__version__ = "0.1.0"
__all__ = ["Client", "Held", "Holding", "Scope", "Session", "new_owner", "Error", "Conflict",
           "Timeout", "NotHeld", "NotOwner", "WrongKind", "TooManyHolds", "Unauthorized", "Forbidden",
           "InvalidArgument", "Unavailable", "Internal", "LeaseLost", "LimitMismatch",
           "SessionNotFound"]
