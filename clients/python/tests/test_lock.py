"""The scoped form against a real dlockd and Redis: grants, kinds, typed
errors, release on every way out, renewal across several leases and none
after release."""
import threading
import time
import unittest

import dlockd

from . import support
from .support import call, name, wait_for


def setUpModule():
    global REDIS, SRV
    REDIS, SRV = support.shared()


class TestScoped(unittest.TestCase):
    def test_holds_and_releases(self):
        c, n = dlockd.Client(SRV.url), name("basic")
        with c.lock(n, ttl_ms=10000, wait_ms=1000) as held:
            self.assertIsInstance(held.fencing_token, int)
            self.assertFalse(held.lost.is_set())
            self.assertTrue(held.held)
            st, body = call(SRV.url, "GET", f"/locks/{n}?owner={held.owner}")
            self.assertEqual((st, body["held"], body["index"]), (200, True, held.fencing_token))
        self.assertFalse(held.held)
        self.assertEqual(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"], False)

    def test_url_and_token_from_the_environment(self):
        import os
        old = os.environ.get("DLOCKD_URL")
        os.environ["DLOCKD_URL"] = SRV.url
        try:
            self.assertEqual(dlockd.Client().url, SRV.url)
        finally:
            if old is None:
                del os.environ["DLOCKD_URL"]
            else:
                os.environ["DLOCKD_URL"] = old

    def test_every_kind(self):
        c, n = dlockd.Client(SRV.url), name("kinds")
        with c.fair_lock(n + "-f", wait_ms=1000) as held:
            self.assertEqual(call(SRV.url, "GET", f"/fairlocks/{n}-f")[1]["holders"][0]["owner"],
                             held.owner)
        with c.read_lock(n, wait_ms=1000) as r1, c.read_lock(n, wait_ms=1000) as r2:
            self.assertNotEqual(r1.owner, r2.owner)
            self.assertEqual(call(SRV.url, "GET", f"/rwlocks/{n}")[1]["readers"], 2)
            with self.assertRaises(dlockd.Conflict) as cm:
                with c.write_lock(n, wait_ms=200):
                    self.fail("a writer got in beside two readers")
            self.assertEqual((cm.exception.status, cm.exception.code), (409, "locked"))
        with c.write_lock(n, wait_ms=1000) as w:
            self.assertEqual(call(SRV.url, "GET", f"/rwlocks/{n}")[1]["mode"], "write")
            self.assertTrue(w.held)
        self.assertEqual(call(SRV.url, "GET", f"/rwlocks/{n}")[1]["locked"], False)

    def test_typed_errors(self):
        c, n = dlockd.Client(SRV.url), name("errors")
        self.assertIs(dlockd.Timeout, dlockd.Conflict)
        with c.lock(n, wait_ms=0):
            t0 = time.monotonic()
            with self.assertRaises(dlockd.Conflict) as cm:
                c.lock(n, wait_ms=300).acquire()
            self.assertGreaterEqual(time.monotonic() - t0, 0.25)
            self.assertEqual(cm.exception.code, "locked")
            self.assertIn("ttl_ms", cm.exception.body)
        with self.assertRaises(dlockd.InvalidArgument) as cm:
            c.lock("bad name").acquire()
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_name"))
        with c.read_lock(n + "-rw"):
            with self.assertRaises(dlockd.WrongKind) as cm:
                c.lock(n + "-rw", wait_ms=0).acquire()
            self.assertEqual(cm.exception.code, "wrong_kind")
        for cls in (dlockd.Conflict, dlockd.NotHeld, dlockd.Unavailable, dlockd.Unauthorized,
                    dlockd.LeaseLost, dlockd.WrongKind):
            self.assertTrue(issubclass(cls, dlockd.Error))

    def test_released_when_the_body_raises(self):
        c, n = dlockd.Client(SRV.url), name("raise")
        with self.assertRaises(ZeroDivisionError):
            with c.lock(n):
                1 / 0
        self.assertEqual(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"], False)

    def test_explicit_acquire_and_release(self):
        c, n = dlockd.Client(SRV.url), name("explicit")
        held = c.lock(n, ttl_ms=5000).acquire()
        self.assertTrue(held.release())
        self.assertFalse(held.release())      # once
        self.assertEqual(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"], False)

    def test_a_waiter_gets_it_at_the_release(self):
        c, n = dlockd.Client(SRV.url), name("handoff")
        got = []
        with c.lock(n) as first:
            t = threading.Thread(target=lambda: got.append(c.lock(n, wait_ms=20000).acquire()))
            t.start()
            self.assertTrue(wait_for(lambda: support.waiters(SRV.url) >= 1))
            self.assertEqual(got, [])
            released_at = time.monotonic()
        t.join(20)
        self.assertLess(time.monotonic() - released_at, 2.0)
        self.assertGreater(got[0].fencing_token, first.fencing_token)
        got[0].release()


class TestRenewal(unittest.TestCase):
    def test_a_body_outliving_several_leases_keeps_the_lock(self):
        proxy = support.Proxy(SRV.port)
        self.addCleanup(proxy.close)
        c, n = dlockd.Client(proxy.url), name("renew")
        with c.lock(n, ttl_ms=600, wait_ms=1000) as held:
            end = time.monotonic() + 2.4       # four leases
            while time.monotonic() < end:
                self.assertTrue(held.held)
                st, body = call(SRV.url, "GET", f"/locks/{n}?owner={held.owner}")
                self.assertTrue(body["held"], body)
                self.assertEqual(body["index"], held.fencing_token)
                time.sleep(0.1)
            self.assertFalse(held.lost.is_set())
        released = proxy.requests("DELETE")[-1][0]
        beats = proxy.requests("POST", "/heartbeat")
        self.assertGreaterEqual(len(beats), 5, "renewed every third of the lease")
        time.sleep(0.8)             # more than a third of the lease after it
        self.assertEqual([b for b in proxy.requests("POST", "/heartbeat") if b[0] > released], [],
                         "no renewal once the release was sent")
        self.assertEqual(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"], False)


if __name__ == "__main__":
    unittest.main()
