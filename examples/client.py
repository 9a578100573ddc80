"""client.py -- take a dlockd lock (waiting up to 10 s), work while the
library renews its lease, release it: also when the work fails or the
script gets Ctrl-C or SIGTERM. Uses the client library in clients/python
(standard library only). DLOCKD_URL picks the server, DLOCKD_LOCK the lock."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients",
                                "python"))     # not needed once dlockd is installed
import dlockd  # noqa: E402

LOCK = os.environ.get("DLOCKD_LOCK", "nightly-report")


def stop(signum, _frame):
    sys.exit(128 + signum)  # unwinds through the with: the lock is released


signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)

c = dlockd.Client()        # $DLOCKD_URL, else http://127.0.0.1:8080
held = None
try:
    with c.lock(LOCK, ttl_ms=15000, wait_ms=10000) as held:
        print("acquired, fencing token", held.fencing_token, flush=True)
        for step in range(1, 4):
            held.check()    # raises dlockd.LeaseLost once the lease is lost: stop working
            print("working, step", step, flush=True)
            time.sleep(1)
        print("done, releasing", flush=True)
    print("released", flush=True)
except SystemExit:
    if held is not None:
        print("released", flush=True)   # the with released it on the way out
    raise
except dlockd.Error as err:
    sys.exit(f"client.py: {err}")
