"""client.py -- take a dlockd lock (waiting up to 10 s), renew it while
working, release it. Python 3 standard library only."""
import json
import os
import urllib.error
import urllib.request

URL = os.environ.get("DLOCKD_URL", "http://127.0.0.1:8080")
LOCK = URL + "/locks/nightly-report"


def call(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:  # 4xx/5xx carry a JSON error body
        return err.code, json.load(err)


status, grant = call("PUT", LOCK, {"owner": "report-py", "ttl_ms": 15000, "wait_ms": 10000})
if status != 200:
    raise SystemExit(f"lock not acquired: {grant['error']}: {grant['message']}")
print("acquired with fencing token", grant["fencing_token"])
for step in range(3):
    print("working, step", step + 1)
    status, renewed = call("POST", LOCK + "/heartbeat", {"owner": "report-py", "ttl_ms": 15000})
    if status != 200:  # 409 not_held: the lease ran out, stop working
        raise SystemExit(f"lease lost: {renewed['message']}")
status, released = call("DELETE", LOCK + "?owner=report-py")
print("released:", released)
