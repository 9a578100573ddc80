"""Sessions against a real dlockd and Redis: two holdings kept across 3x
the session's ttl by its own heartbeat; ending it frees them for another
client at once; a session ended from outside is known lost; a multi-lock
is all or none with a blocker, then granted when the blocker releases."""
import threading
import time
import unittest

import dlockd

from . import support
from .support import call, name


def setUpModule():
    global REDIS, SRV
    REDIS, SRV = support.shared()


class TestSession(unittest.TestCase):
    def test_heartbeat_keeps_two_holdings_then_end_frees_them(self):
        c, n = dlockd.Client(SRV.url), name("sess")
        ttl = 1500
        with c.session(ttl_ms=ttl, name="py-test") as s:
            a = s.lock(n + "-a", wait_ms=1000)
            r = s.read_lock(n + "-b", wait_ms=1000)
            self.assertEqual((a.kind, a.owner, r.kind), ("lock", s.id, "read"))
            self.assertIsInstance(a.fencing_token, int)
            time.sleep(3 * ttl / 1000)          # only the session's heartbeat renews them
            self.assertTrue(s.held)
            self.assertFalse(s.lost.is_set())
            self.assertEqual(sorted((h.kind, h.name, h.fencing_token) for h in s.holdings()),
                             [("lock", n + "-a", a.fencing_token),
                              ("read", n + "-b", r.fencing_token)])
            st, body = call(SRV.url, "GET", f"/locks/{n}-a")
            self.assertEqual((st, body["locked"], body["index"]), (200, True, a.fencing_token))
            with self.assertRaises(dlockd.Conflict):
                c.lock(n + "-a", wait_ms=0).acquire()
        self.assertFalse(s.held)
        self.assertFalse(s.close())              # once: a second close does nothing
        # Ended: another client gets both at once, without waiting.
        t0 = time.monotonic()
        with c.lock(n + "-a", wait_ms=0), c.write_lock(n + "-b", wait_ms=0):
            self.assertLess(time.monotonic() - t0, 2.0)
        with self.assertRaises(dlockd.SessionNotFound):
            s.holdings()

    def test_ended_from_outside_is_lost(self):
        c, n = dlockd.Client(SRV.url), name("sess-out")
        ttl = 3000
        s = c.session(ttl_ms=ttl)
        s.fair_lock(n, wait_ms=1000)
        st, body = call(SRV.url, "DELETE", f"/sessions/{s.id}")
        self.assertEqual((st, body["ended"]), (200, True))
        t0 = time.monotonic()
        # The next heartbeat (a third of the ttl) answers 404: lost by then,
        # with a generous bound for a loaded machine.
        self.assertTrue(s.lost.wait(ttl / 1000 + 5))
        self.assertLess(time.monotonic() - t0, ttl / 1000 + 5)
        self.assertIsInstance(s.lost_reason, dlockd.SessionNotFound)
        self.assertEqual(s.lost_reason.code, "session_not_found")
        self.assertFalse(s.held)
        with self.assertRaises(dlockd.LeaseLost):
            s.check()
        with self.assertRaises(dlockd.LeaseLost):
            s.lock(n + "-x", wait_ms=0)          # a lost session takes nothing
        self.assertFalse(s.close())              # ended already: no DELETE needed
        self.assertEqual(call(SRV.url, "GET", f"/fairlocks/{n}")[1]["locked"], False)

    def test_with_raises_lease_lost_when_ended_inside(self):
        c = dlockd.Client(SRV.url)
        with self.assertRaises(dlockd.LeaseLost):
            with c.session(ttl_ms=900) as s:
                call(SRV.url, "DELETE", f"/sessions/{s.id}")
                self.assertTrue(s.lost.wait(10))

    def test_lock_all_is_all_or_none_then_granted(self):
        c, n = dlockd.Client(SRV.url), name("multi")
        blocker = c.lock(n + "-b", ttl_ms=30000, wait_ms=0).acquire()
        with c.session(ttl_ms=5000) as s:
            want = [("lock", n + "-a"), ("lock", n + "-b"), ("semaphore", n + "-s", 2)]
            with self.assertRaises(dlockd.Conflict) as cm:
                s.lock_all(want, wait_ms=300)
            self.assertEqual((cm.exception.status, cm.exception.code), (409, "locked"))
            self.assertEqual(cm.exception.body["lock"], {"kind": "lock", "name": n + "-b"})
            self.assertEqual(s.holdings(), [])   # nothing of it held
            self.assertEqual(call(SRV.url, "GET", f"/locks/{n}-a")[1]["locked"], False)
            # Granted when the blocker releases, while the call waits.
            threading.Timer(0.5, blocker.release).start()
            t0 = time.monotonic()
            got = s.lock_all(want, wait_ms=20000)
            self.assertLess(time.monotonic() - t0, 15)
            self.assertEqual(sorted((h.kind, h.name) for h in got),
                             [("lock", n + "-a"), ("lock", n + "-b"), ("semaphore", n + "-s")])
            self.assertTrue(all(isinstance(h.fencing_token, int) and h.owner == s.id for h in got))
            self.assertEqual(sorted(s.holdings()), sorted(got))
            self.assertEqual(s.lock_all(want), got)    # a repeat: the same holdings
        self.assertEqual(call(SRV.url, "GET", f"/locks/{n}-b")[1]["locked"], False)

    def test_a_holding_dropped_loses_the_session(self):
        c, n = dlockd.Client(SRV.url), name("sess-drop")
        with self.assertRaises(dlockd.LeaseLost) as cm:
            with c.session(ttl_ms=1500) as s:
                s.write_lock(n, wait_ms=1000)
                c.force_release(n, kind="write")
                self.assertTrue(s.lost.wait(10))    # the next heartbeat reports it dropped
        self.assertEqual(cm.exception.code, "dropped")
        self.assertIn(n, str(s.lost_reason))
        # Lost, but not ended by dlockd: the with's end still ended it.
        self.assertEqual(call(SRV.url, "GET", f"/sessions/{s.id}")[0], 404)

    def test_bad_arguments_change_nothing(self):
        c = dlockd.Client(SRV.url)
        with self.assertRaises(dlockd.InvalidArgument):
            c.session(ttl_ms=0)
        with c.session(ttl_ms=5000) as s:
            with self.assertRaises(dlockd.InvalidArgument):
                s.lock_all([("lock", "x"), ("lock", "x")])      # a name twice: 400
            with self.assertRaises(dlockd.InvalidArgument):
                s.lock("y", wait_ms=-1)
            self.assertEqual(s.holdings(), [])


if __name__ == "__main__":
    unittest.main()
