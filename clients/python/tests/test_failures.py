"""What goes wrong, against a real dlockd and Redis: a lost lease (forced
release, renewals that fail), a dlockd that waits less than asked, 503s,
an answer lost on the way, auth, HTTPS with mutual TLS."""
import os
import time
import unittest

import dlockd

from . import support
from .support import call, name, wait_for


def setUpModule():
    global REDIS, SRV
    REDIS, SRV = support.shared()


class TestLoss(unittest.TestCase):
    def test_force_release_fires_lost_within_a_second(self):
        # ttl 15 s: the next heartbeat is 5 s away, so the watch tells it
        c, n = dlockd.Client(SRV.url), name("force")
        with self.assertRaises(dlockd.LeaseLost) as cm:
            with c.lock(n, ttl_ms=15000) as held:
                time.sleep(0.2)             # the watch is in place
                t0 = time.monotonic()
                self.assertEqual(call(SRV.url, "DELETE", f"/locks/{n}?force=true")[0], 200)
                self.assertTrue(held.lost.wait(5))
                took = time.monotonic() - t0
                self.assertFalse(held.held)
        self.assertLess(took, 1.0, f"lost set {took:.3f} s after the forced release")
        self.assertIsInstance(held.lost_reason, dlockd.NotHeld)
        self.assertIsInstance(cm.exception, dlockd.Error)

    def test_not_held_on_a_heartbeat_is_loss_at_once(self):
        c, n = dlockd.Client(SRV.url, watch_held=False), name("notheld")
        held = c.lock(n, ttl_ms=900).acquire()
        call(SRV.url, "DELETE", f"/locks/{n}?force=true")
        self.assertTrue(held.lost.wait(2), "the next heartbeat (300 ms) says not_held")
        self.assertEqual(held.lost_reason.code, "not_held")
        with self.assertRaises(dlockd.LeaseLost):
            held.check()
        self.assertFalse(held.release())

    def _renewals_fail(self, rule, tag):
        """A held lock whose renewals fail as the proxy's rule says, from
        its second on: lost must be set before dlockd's lease ends (dlockd
        still has the lock then)."""
        proxy = support.Proxy(SRV.port)
        self.addCleanup(proxy.close)
        c, n = dlockd.Client(proxy.url, watch_held=False), name(tag)
        held = c.lock(n, ttl_ms=1500).acquire()
        time.sleep(0.7)                      # renewed at 500 ms
        proxy.rule = lambda m, p: rule
        cut = time.monotonic()
        # the server's view: the lock is free once its lease runs out
        self.assertTrue(wait_for(lambda: held.lost.is_set() or
                                 not call(SRV.url, "GET", f"/locks/{n}")[1]["locked"], 5, 0.005))
        self.assertTrue(held.lost.is_set(), f"{rule}: lost is set before dlockd's lease ends")
        self.assertLessEqual(time.monotonic() - cut, 1.5)
        self.assertFalse(held.held)
        self.assertLess(held.lease_deadline, time.monotonic() + 0.01)
        self.assertTrue(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"],
                        "and dlockd still had it: the client stopped first")
        self.assertIsInstance(held.lost_reason, dlockd.Unavailable)
        with self.assertRaises(dlockd.LeaseLost):
            held.check()
        proxy.rule = lambda m, p: "forward"
        held.release()
        self.assertEqual(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"], False)

    def test_failing_renewals_are_loss_before_the_lease_ends(self):
        self._renewals_fail("hole", "silent")    # dlockd answers nothing any more

    def test_an_answer_trickled_a_byte_at_a_time_is_loss_before_the_lease_ends(self):
        # a heartbeat's answer that keeps coming, too slowly: http.client's
        # timeout is per read, so each byte renewed it and the renewal
        # waited past the lease, lost never set (a probe: 19-22 s of work
        # after another owner had the lock)
        self._renewals_fail("trickle", "trickle")


    def test_a_request_that_times_out_says_so(self):
        # the client's own timeout shuts its socket, which http.client
        # reported as dlockd's hang-up: "Remote end closed connection
        # without response" (a probe)
        proxy = support.Proxy(SRV.port)
        self.addCleanup(proxy.close)
        proxy.rule = lambda m, p: "hole"
        c = dlockd.Client(proxy.url, timeout=0.3, retry_ms=0)
        t0 = time.monotonic()
        with self.assertRaises(dlockd.Unavailable) as cm:
            c.lock(name("timeout"), wait_ms=0).acquire()
        self.assertLess(time.monotonic() - t0, 3.0)
        self.assertIn("no answer within 0.3 s", str(cm.exception))
        self.assertNotIn("Remote end closed", str(cm.exception))


class TestRetries(unittest.TestCase):
    def test_waits_longer_than_dlockds_longest_poll_are_chained(self):
        short = support.Dlockd(REDIS, "--max-wait-ms", "400")
        self.addCleanup(short.stop)
        c, n = dlockd.Client(short.url), name("chain")
        st, _ = call(short.url, "PUT", f"/locks/{n}?owner=other&ttl_ms=1500")
        self.assertEqual(st, 200)
        t0 = time.monotonic()
        with c.lock(n, wait_ms=10000) as held:
            self.assertGreater(time.monotonic() - t0, 1.0)
            self.assertTrue(held.held)
        with c.lock(n + "-forever") as held:    # wait_ms=None, and a watch of 60 s asked
            self.assertTrue(held.held)

    def test_503_is_retried_after_retry_after_within_the_deadline(self):
        proxy = support.Proxy(SRV.port)
        self.addCleanup(proxy.close)
        c, n = dlockd.Client(proxy.url), name("503")
        first = []
        proxy.rule = lambda m, p: 503 if m == "PUT" and not first and not first.append(1) else "forward"
        t0 = time.monotonic()
        with c.lock(n, wait_ms=5000) as held:
            self.assertGreaterEqual(time.monotonic() - t0, 0.9, "after Retry-After: 1")
            self.assertEqual(len(proxy.requests("PUT")), 2)
            self.assertTrue(held.held)
        proxy.rule = lambda m, p: 503
        t0 = time.monotonic()
        with self.assertRaises(dlockd.Unavailable) as cm:
            c.lock(n, wait_ms=300).acquire()
        self.assertLess(time.monotonic() - t0, 0.9, "no retry past the caller's deadline")
        self.assertEqual((cm.exception.status, cm.exception.code), (503, "backend_unavailable"))

    def test_a_put_whose_answer_was_lost_is_sent_again(self):
        proxy = support.Proxy(SRV.port)
        self.addCleanup(proxy.close)
        c, n = dlockd.Client(proxy.url), name("lostanswer")
        first = []
        proxy.rule = lambda m, p: "drop" if m == "PUT" and not first and not first.append(1) else "forward"
        with c.lock(n, wait_ms=5000) as held:
            self.assertEqual(len(proxy.requests("PUT")), 2)
            body = call(SRV.url, "GET", f"/locks/{n}")[1]
            self.assertEqual([(h["owner"], h["holds"]) for h in body["holders"]], [(held.owner, 1)],
                             "one holding, one hold: the second PUT was a repeat")
            self.assertEqual(body["index"], held.fencing_token)
        self.assertEqual(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"], False,
                         "one release frees it")

    def test_unreachable(self):
        c = dlockd.Client(f"http://127.0.0.1:{support.free_port()}", retry_ms=600)
        t0 = time.monotonic()
        with self.assertRaises(dlockd.Unavailable) as cm:
            c.lock(name("down"), wait_ms=5000).acquire()
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual((cm.exception.status, cm.exception.code), (0, "unreachable"))
        self.assertIn("cannot reach dlockd", str(cm.exception))


class TestAuthAndTLS(unittest.TestCase):
    def test_tokens_and_an_admins_force_release(self):
        path = os.path.join(support.TMP, "tokens")
        with open(path, "w") as f:
            f.write("py-client-token-0123456789 client py- pyclient\n"
                    "py-admin-token-0123456789 admin * pyadmin\n")
        srv = support.Dlockd(REDIS, "--auth-file", path)
        self.addCleanup(srv.stop)
        n = name("auth")
        with self.assertRaises(dlockd.Unauthorized) as cm:
            dlockd.Client(srv.url).lock(n).acquire()
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
        with self.assertRaises(dlockd.Forbidden):
            dlockd.Client(srv.url, "py-client-token-0123456789").lock("other-" + n).acquire()
        admin = dlockd.Client(srv.url, "py-admin-token-0123456789")
        client = dlockd.Client(srv.url, "py-client-token-0123456789")
        with self.assertRaises(dlockd.LeaseLost):
            with client.lock(n, ttl_ms=15000) as held:
                time.sleep(0.2)
                t0 = time.monotonic()
                self.assertTrue(admin.force_release(n))
                self.assertTrue(held.lost.wait(5))
                took = time.monotonic() - t0
        self.assertLess(took, 1.0, f"lost set {took:.3f} s after the forced release")

    def test_https_with_a_private_ca_and_mutual_tls(self):
        p = support.pki()
        srv = support.Dlockd(REDIS, "--tls-cert", p["server.pem"], "--tls-key", p["server.key"],
                             "--tls-client-ca", p["ca.pem"])
        self.addCleanup(srv.stop)
        n = name("tls")
        c = dlockd.Client(srv.url, ca=p["ca.pem"], cert=p["client.pem"], key=p["client.key"])
        with c.lock(n, ttl_ms=900) as held:
            time.sleep(0.7)                  # renewed over TLS too
            self.assertTrue(held.held)
        self.assertTrue(c.status(n)["locked"] is False)
        with self.assertRaises(dlockd.Unavailable):    # no client certificate: no handshake
            dlockd.Client(srv.url, ca=p["ca.pem"], retry_ms=0).lock(n, wait_ms=0).acquire()


if __name__ == "__main__":
    unittest.main()
