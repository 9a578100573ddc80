"""client.py -- take a dlockd lock (waiting up to 10 s), renew it while
working, release it: also when the work fails or the script gets Ctrl-C or
SIGTERM. Python 3 standard library only. DLOCKD_URL picks the server,
DLOCKD_LOCK the lock."""
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
import uuid

URL = os.environ.get("DLOCKD_URL", "http://127.0.0.1:8080")
LOCK = URL + "/locks/" + os.environ.get("DLOCKD_LOCK", "nightly-report")
# Unique per run: the holder's PUT is granted again (a repeat), so two runs sharing an
# owner would both "hold" the lock at once.
OWNER = "report-" + uuid.uuid4().hex


class Refused(Exception):
    """dlockd answered with an error: {"error", "message"}."""


def call(method, url, body=None):
    """The JSON answer; raises Refused on an error answer and exits with a
    one-line message when dlockd cannot be reached."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as err:  # 4xx/5xx carry a JSON error body
        answer = json.load(err)
        raise Refused(f"{answer['error']}: {answer['message']}") from None
    except (urllib.error.URLError, OSError) as err:
        sys.exit(f"client.py: cannot reach dlockd at {URL}: {getattr(err, 'reason', err)}")


def stop(signum, _frame):
    sys.exit(128 + signum)  # unwinds through the finally below


signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)

try:
    # From here on the lock may be ours (an interrupted PUT may have been
    # granted), so every way out goes through the finally.
    try:
        grant = call("PUT", LOCK, {"owner": OWNER, "ttl_ms": 15000, "wait_ms": 10000})
        print("acquired, fencing token", grant["fencing_token"], flush=True)
        for step in range(1, 4):
            print("working, step", step, flush=True)
            time.sleep(1)
            # renew; a 409 not_held means the lease was lost: stop working
            call("POST", LOCK + "/heartbeat", {"owner": OWNER, "ttl_ms": 15000})
        print("done, releasing", flush=True)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            call("DELETE", LOCK + "?owner=" + OWNER)
            print("released", flush=True)
        except Refused:
            pass  # not held (never acquired, or the lease ran out)
except Refused as err:
    sys.exit(f"client.py: {err}")
