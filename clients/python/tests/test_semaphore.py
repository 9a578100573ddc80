"""Semaphores (c.semaphore) against a real dlockd and Redis: never more
than `limit` holders among more contenders, the limit in force
(LimitMismatch), the value kept with a permit, loss on a forced release,
acquire/release and the asyncio form."""
import asyncio
import threading
import time
import unittest

import dlockd

from . import support
from .support import call, name


def setUpModule():
    global REDIS, SRV
    REDIS, SRV = support.shared()


class TestSemaphore(unittest.TestCase):
    def test_at_most_limit_holders_among_more_contenders(self):
        limit, contenders = 2, 4
        c, n = dlockd.Client(SRV.url), name("sem")
        guard = threading.Lock()
        inside, most, served, errors = [0], [0], [], []
        full = threading.Event()        # `limit` were in at once: let them go

        def contender():
            try:
                with c.semaphore(n, limit, ttl_ms=10000, wait_ms=60000) as held:
                    with guard:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                        if inside[0] == limit:
                            full.set()
                    st, body = call(SRV.url, "GET", f"/semaphores/{n}")
                    self.assertEqual(st, 200)
                    self.assertLessEqual(body["held"], limit)
                    self.assertIn(held.owner, [h["owner"] for h in body["holders"]])
                    full.wait(10)
                    time.sleep(0.05)
                    with guard:
                        inside[0] -= 1
                    served.append(held.fencing_token)
            except Exception as err:        # reported below, not lost in a thread
                errors.append(err)

        threads = [threading.Thread(target=contender) for _ in range(contenders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        self.assertEqual(errors, [])
        self.assertEqual(len(served), contenders)
        self.assertEqual(len(set(served)), contenders, "each permit has its own token")
        self.assertEqual(most[0], limit, f"{most[0]} holders at once, limit {limit}")
        body = call(SRV.url, "GET", f"/semaphores/{n}")[1]
        self.assertEqual((body["held"], body["available"], body["limit"]), (0, limit, limit))

    def test_another_limit_raises_limit_mismatch(self):
        c, n = dlockd.Client(SRV.url), name("semlimit")
        with c.semaphore(n, 2, wait_ms=1000) as held:
            self.assertEqual(held.limit, 2)
            with self.assertRaises(dlockd.LimitMismatch) as cm:
                c.semaphore(n, 5, wait_ms=0).acquire()
            err = cm.exception
            self.assertIsInstance(err, dlockd.Error)
            self.assertEqual((err.status, err.code, err.limit), (409, "limit_mismatch", 2))
            body = call(SRV.url, "GET", f"/semaphores/{n}")[1]
            self.assertEqual((body["held"], body["limit"]), (1, 2), "nothing was changed")
        with self.assertRaises(dlockd.InvalidArgument):
            c.semaphore(n, 0)
        with self.assertRaises(dlockd.Conflict):
            with c.semaphore(n + "-1", 1, wait_ms=1000):
                with c.semaphore(n + "-1", 1, wait_ms=200):
                    self.fail("two holders of a semaphore of limit 1")

    def test_value_acquire_and_release(self):
        c, n = dlockd.Client(SRV.url), name("semval")
        held = c.semaphore(n, 3, ttl_ms=900, wait_ms=1000, value="build-17").acquire()
        time.sleep(1.5)                     # renewed past its first lease
        body = call(SRV.url, "GET", f"/semaphores/{n}?owner={held.owner}")[1]
        self.assertEqual((body["held"], body["holds"], body["available"]), (1, 1, 2))
        self.assertEqual(body["holders"][0]["value"], "build-17")
        self.assertTrue(held.held)
        self.assertTrue(held.release())
        self.assertFalse(held.release())
        self.assertEqual(call(SRV.url, "GET", f"/semaphores/{n}")[1]["held"], 0)

    def test_force_release_is_loss(self):
        c, n = dlockd.Client(SRV.url), name("semforce")
        with self.assertRaises(dlockd.LeaseLost):
            with c.semaphore(n, 2, ttl_ms=15000) as held:
                time.sleep(0.2)             # the watch is in place
                t0 = time.monotonic()
                self.assertEqual(call(SRV.url, "DELETE", f"/semaphores/{n}?force=true")[0], 200)
                self.assertTrue(held.lost.wait(5))
                took = time.monotonic() - t0
        self.assertLess(took, 1.0, f"lost set {took:.3f} s after the forced release")
        self.assertEqual(held.lost_reason.code, "not_held")

    def test_async_with(self):
        c, n = dlockd.Client(SRV.url), name("semaio")

        async def main():
            async with c.semaphore(n, 1, wait_ms=1000) as held:
                body = call(SRV.url, "GET", f"/semaphores/{n}")[1]
                self.assertEqual(body["holders"][0]["owner"], held.owner)
                with self.assertRaises(dlockd.Conflict):
                    await c.semaphore(n, 1, wait_ms=100).aacquire()
        asyncio.run(main())
        self.assertEqual(call(SRV.url, "GET", f"/semaphores/{n}")[1]["held"], 0)


if __name__ == "__main__":
    unittest.main()
