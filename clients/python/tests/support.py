"""support.py -- what the tests run against: a real redis-server and real
dlockd processes on free loopback ports (DLOCKD_BIN, else build/dlockd of
this checkout), test certificates made with openssl, an HTTP proxy that
can lose answers, answer 503 or swallow requests, and raw HTTP for the
test's own view of a lock. Every process is stopped by its pid at exit.
With $DLOCKD_CONTRACT_LOG set, every answer the library gets is appended
to that file (see record below), for tests/run.sh to check against
openapi.yaml."""
import asyncio
import atexit
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from urllib.parse import unquote, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)                       # clients/python
REPO = os.path.dirname(os.path.dirname(PYROOT))
DLOCKD_BIN = os.path.abspath(os.environ.get("DLOCKD_BIN") or os.path.join(REPO, "build", "dlockd"))
TMP = tempfile.mkdtemp(prefix="dlockd-py-")
_procs = []


def _cleanup():
    for p in _procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if not os.environ.get("DLOCKD_KEEP_TMP"):
        shutil.rmtree(TMP, ignore_errors=True)


atexit.register(_cleanup)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(argv, log):
    with open(log, "ab") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
    _procs.append(p)
    return p


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Redis:
    def __init__(self):
        self.port = free_port()
        d = os.path.join(TMP, f"redis-{self.port}")
        os.mkdir(d)
        self.proc = _spawn(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                            "--dir", d, "--save", "", "--appendonly", "no"],
                           os.path.join(d, "redis.log"))
        for _ in range(1000):
            try:
                with socket.create_connection(("127.0.0.1", self.port), 1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        raise RuntimeError(f"redis-server did not start (see {d}/redis.log)")


class Dlockd:
    """dlockd on a free port, with flags; url is http:// or https://."""

    def __init__(self, redis, *flags):
        if not os.access(DLOCKD_BIN, os.X_OK):
            raise unittest.SkipTest(f"no dlockd at {DLOCKD_BIN}: build it (make) or set DLOCKD_BIN")
        self.port = free_port()
        tls = "--tls-cert" in flags
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.log = os.path.join(TMP, f"dlockd-{self.port}.log")
        self.proc = _spawn([DLOCKD_BIN, "--listen", f"127.0.0.1:{self.port}", "--redis",
                            f"redis://127.0.0.1:{redis.port}/0", *flags], self.log)
        for _ in range(1000):
            try:
                with socket.create_connection(("127.0.0.1", self.port), 1):
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        raise RuntimeError(f"dlockd did not start (see {self.log})")

    def stop(self):
        stop(self.proc)


_shared = {}


def shared():
    """The Redis and the plain dlockd most tests share."""
    if not _shared:
        _shared["redis"] = Redis()
        _shared["dlockd"] = Dlockd(_shared["redis"])
    return _shared["redis"], _shared["dlockd"]


def name(tag):
    return f"py-{tag}-{uuid.uuid4().hex[:8]}"


def call(url, method, path, headers=None, context=None):
    """The test's own view: (status, JSON body)."""
    host, port = url.split("//")[1].split(":")
    if url.startswith("https"):
        conn = http.client.HTTPSConnection(host, int(port), timeout=30, context=context)
    else:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, (json.loads(raw) if raw else None)
        except ValueError:
            return resp.status, raw.decode()
    finally:
        conn.close()


def waiters(url):
    """dlockd_waiters: the acquires waiting now."""
    for line in call(url, "GET", "/metrics")[1].splitlines():
        if line.startswith("dlockd_waiters "):
            return int(float(line.split()[1]))
    return 0


def wait_for(cond, timeout=10.0, step=0.01):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


# ----- certificates -----

_pki = {}


def pki():
    """ca.pem, server.pem/key (127.0.0.1, localhost), client.pem/key: made
    once with openssl, as the README shows."""
    if _pki:
        return _pki
    if not shutil.which("openssl"):
        raise unittest.SkipTest("openssl is not installed")
    d = os.path.join(TMP, "pki")
    os.mkdir(d)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]

    def run(*argv):
        subprocess.run(argv, cwd=d, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", *ec, "-days", "2", "-keyout", "ca.key", "-out", "ca.pem",
        "-subj", "/CN=dlockd python test CA")
    for who, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                "extendedKeyUsage=serverAuth\n"),
                     ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, who + ".ext"), "w") as f:
            f.write(ext)
        run("openssl", "req", *ec, "-keyout", who + ".key", "-out", who + ".csr",
            "-subj", "/CN=" + who)
        run("openssl", "x509", "-req", "-in", who + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", who + ".ext", "-out", who + ".pem")
    _pki.update({k: os.path.join(d, k) for k in (
        "ca.pem", "server.pem", "server.key", "client.pem", "client.key")})
    return _pki


# ----- a proxy that misbehaves on request -----

class Proxy:
    """HTTP between the client and dlockd, one request per connection.
    rule(method, path) says what to do with each request: "forward";
    "drop" (forward it, then close the client's connection without the
    answer: an answer lost on the way); "hole" (never answer, never
    forward); "trickle" (forward it, then pass the answer on a byte every
    trickle_s: a link that is slow but never silent); or an int status (answer that, with Retry-After: 1, and
    forward nothing). log holds (monotonic time, method, path) of each."""

    def __init__(self, target_port):
        self.target = target_port
        self.rule = lambda method, path: "forward"
        self.trickle_s = 0.1
        self.log = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._holes = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self._sock.close()
        for s in self._holes:
            s.close()

    def requests(self, method=None, contains=""):
        return [e for e in list(self.log) if (method is None or e[1] == method) and contains in e[2]]

    def _accept(self):
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_message(sock):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return head, body

    def _serve(self, conn):
        try:
            msg = self._read_message(conn)
            if msg is None:
                conn.close()
                return
            head, body = msg
            method, target = head.split(b"\r\n")[0].decode().split()[:2]
            self.log.append((time.monotonic(), method, target))
            what = self.rule(method, target)
            if what == "hole":
                self._holes.append(conn)
                return
            if isinstance(what, int):
                payload = json.dumps({"error": "backend_unavailable",
                                      "message": "injected by the test proxy"}).encode()
                conn.sendall(b"HTTP/1.1 %d Unavailable\r\nContent-Type: application/json\r\n"
                             b"Retry-After: 1\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                             % (what, len(payload)) + payload)
                conn.close()
                return
            up = socket.create_connection(("127.0.0.1", self.target))
            lines = [l for l in head.split(b"\r\n") if not l.lower().startswith(b"connection:")]
            up.sendall(b"\r\n".join(lines) + b"\r\nConnection: close\r\n\r\n" + body)
            answer = b""
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    break
                answer += chunk
            up.close()
            if what == "trickle":
                for i in range(len(answer)):
                    conn.sendall(answer[i:i + 1])
                    time.sleep(self.trickle_s)
            elif what != "drop":
                conn.sendall(answer)
            conn.close()
        except OSError:
            conn.close()


def python_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = PYROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


PYTHON = sys.executable


# ----- the answers the library got, for the contract check -----
#
# One JSON line {method, path, status, content_type, body} per answer, as
# the Go and Node suites write, for tests/contract/validate.mjs. Recorded
# where the library's bytes pass (http.client for the blocking form,
# asyncio streams for the asyncio one), so the library itself has no test
# path; only requests carrying its User-Agent count, not the tests' own.

CONTRACT_LOG = os.environ.get("DLOCKD_CONTRACT_LOG")
_contract_lock = threading.Lock()


def record(method, target, status, content_type, body):
    line = json.dumps({"method": method, "path": unquote(urlsplit(target).path),
                       "status": status, "content_type": content_type or "",
                       "body": body.decode("utf-8", "replace")})
    with _contract_lock, open(CONTRACT_LOG, "a") as f:
        f.write(line + "\n")


def _library(headers):
    return any(k.lower() == "user-agent" and v.startswith("dlockd-python/")
               for k, v in (headers or {}).items())


def _record_blocking():
    request, getresponse = http.client.HTTPConnection.request, http.client.HTTPConnection.getresponse

    def recording_request(self, method, url, body=None, headers=None, **kw):
        self._contract = (method, url) if _library(headers) else None
        return request(self, method, url, body, headers or {}, **kw)

    def recording_getresponse(self):
        resp = getresponse(self)
        if getattr(self, "_contract", None):
            raw = resp.read()
            record(*self._contract, resp.status, resp.getheader("Content-Type"), raw)
            resp.read = lambda *args, **kw: raw
        return resp

    http.client.HTTPConnection.request = recording_request
    http.client.HTTPConnection.getresponse = recording_getresponse


class _RecordingStream:
    """Both ends of one asyncio connection of the library: the request
    line written, the bytes read; the answer recorded at close."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.sent, self.got = b"", b""

    # StreamWriter
    def write(self, data):
        self.sent += data
        self.writer.write(data)

    def close(self):
        self.writer.close()
        head, _, body = self.got.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        request = self.sent.decode("latin-1").split("\r\n")
        if len(lines[0].split()) < 2 or "user-agent: dlockd-python/" not in \
                "\n".join(request).lower():
            return
        ctype = next((l.partition(":")[2].strip() for l in lines[1:]
                      if l.lower().startswith("content-type:")), "")
        method, target = request[0].split()[:2]
        record(method, target, int(lines[0].split()[1]), ctype, body)

    # StreamReader
    async def _keep(self, data):
        self.got += data
        return data

    async def readline(self):
        return await self._keep(await self.reader.readline())

    async def readexactly(self, n):
        return await self._keep(await self.reader.readexactly(n))

    async def read(self, n=-1):
        return await self._keep(await self.reader.read(n))

    def __getattr__(self, attr):
        return getattr(self.writer, attr)


def _record_asyncio():
    open_connection = asyncio.open_connection

    async def recording_open_connection(*args, **kw):
        stream = _RecordingStream(*await open_connection(*args, **kw))
        return stream, stream

    asyncio.open_connection = recording_open_connection


if CONTRACT_LOG:
    _record_blocking()
    _record_asyncio()
