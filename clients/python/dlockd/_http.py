"""_http.py -- one HTTP request to dlockd, over a connection of its own
(so that any request can be abandoned by closing it: dlockd takes a hang-up
as the end of a wait, and gives back a queue place or a grant it made
meanwhile): blocking with http.client, or on asyncio streams. Either
returns an Answer, or Unreachable when no answer came (refused, reset,
timed out, TLS failed)."""
import asyncio
import http.client
import json
import os
import socket
import ssl
import threading
from urllib.parse import urlencode, urlsplit

from ._core import Answer, Unreachable

USER_AGENT = "dlockd-python/0.1"


def ssl_context(ca=None, cert=None, key=None):
    """The context for https://: the system's CAs, or ca (a PEM file of the
    CA that signed dlockd's certificate); cert and key: the client's
    certificate for a dlockd with --tls-client-ca (mutual TLS)."""
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


class Transport:
    def __init__(self, url, token=None, context=None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"dlockd URL must be http://host:port or https://host:port, not {url!r}")
        self.url = url.rstrip("/")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.context = (context or ssl_context()) if self.https else None
        self.headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def _target(self, path, params):
        return self.prefix + path + ("?" + urlencode(params) if params else "")

    def _body(self, body):
        """The bytes and headers of a JSON body (None: no body)."""
        if body is None:
            return None, self.headers
        return json.dumps(body).encode(), {**self.headers, "Content-Type": "application/json"}

    def _unreachable(self, err):
        reason = getattr(err, "reason", None) or err
        return Unreachable(f"cannot reach dlockd at {self.url}: {reason or type(err).__name__}")

    # ----- blocking -----

    def request(self, method, path, params, timeout, tracker=None, body=None):
        """tracker, if given (a Tracker), holds the connection while the
        request is in flight, so that another thread can abandon it. body:
        a JSON document to send."""
        raw, headers = self._body(body)
        if self.https:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=self.context)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        # timeout bounds the whole request: http.client's own is per socket
        # operation, so an answer trickled a byte at a time never ran out
        # (a renewal stuck past the lease it was to keep)
        deadline = threading.Timer(timeout, _time_out, (conn,))
        deadline.daemon = True
        deadline.start()
        try:
            if tracker and not tracker.add(conn):
                return Unreachable("abandoned")
            if not tracker:
                conn.connect()
            if getattr(conn, "dlockd_abandoned", False):      # before it had a socket
                return Unreachable("abandoned: timed out")
            conn.request(method, self._target(path, params), body=raw, headers=headers)
            resp = conn.getresponse()
            return _answer(resp.status, resp.getheader("Retry-After"), resp.read())
        except (OSError, http.client.HTTPException, ValueError) as err:
            if getattr(conn, "dlockd_timed_out", False):     # not dlockd's hang-up
                return Unreachable(f"cannot reach dlockd at {self.url}: no answer within "
                                   f"{timeout:g} s")
            return self._unreachable(err)
        finally:
            deadline.cancel()
            if tracker:
                tracker.done(conn)
            conn.close()

    # ----- asyncio -----

    async def arequest(self, method, path, params, timeout, body=None):
        raw, headers = self._body(body)
        raw = raw or b""
        writer = None
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self.context,
                    server_hostname=self.host if self.https else None)
                head = [f"{method} {self._target(path, params)} HTTP/1.1",
                        f"Host: {self.host}:{self.port}", f"Content-Length: {len(raw)}",
                        "Connection: close"]
                head += [f"{k}: {v}" for k, v in headers.items()]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + raw)
                await writer.drain()
                status = int((await reader.readline()).split()[1])
                headers = {}
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    k, _, v = line.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                if "content-length" in headers:
                    body = await reader.readexactly(int(headers["content-length"]))
                elif method == "HEAD":
                    body = b""
                else:
                    body = await reader.read()
                return _answer(status, headers.get("retry-after"), body)
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as err:
            return self._unreachable(err)
        finally:
            if writer is not None:
                writer.close()


def _time_out(conn):
    """The request's time is up: abandon it, saying so (its socket's
    shutdown reads as the server's hang-up otherwise)."""
    conn.dlockd_timed_out = True
    _abandon(conn)


def _abandon(conn):
    """Wake whatever thread is blocked on conn's socket (its request is
    abandoned: the read or write fails)."""
    conn.dlockd_abandoned = True
    try:
        conn.sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):
        pass


def _answer(status, retry_after, raw):
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    try:
        retry = float(retry_after) if retry_after is not None else None
    except ValueError:
        retry = None
    return Answer(status, body, retry)


class Tracker:
    """The connections a holding has in flight, so that release (or loss)
    can abandon them at once: shutting a socket wakes the thread blocked on
    it. Once closed, a new request is refused before it is sent."""

    def __init__(self):
        self._lock = threading.Lock()
        self._conns = set()
        self._closed = False

    def add(self, conn):
        # http.client connects lazily: connect here, under no lock, then
        # register; a close in between is seen by the check below.
        with self._lock:
            if self._closed:
                return False
        conn.connect()
        with self._lock:
            if self._closed:
                conn.close()
                return False
            self._conns.add(conn)
        return True

    def done(self, conn):
        with self._lock:
            self._conns.discard(conn)

    def close(self):
        with self._lock:
            self._closed = True
            conns = list(self._conns)
        for conn in conns:
            _abandon(conn)


def env(name):
    value = os.environ.get(name)
    return value if value else None
