"""The asyncio form: `async with`, the body cancelled on loss (LeaseLost
instead of the CancelledError), a cancelled wait or body gives back its
queue place or hold."""
import asyncio
import time
import unittest

import dlockd

from . import support
from .support import call, name


def setUpModule():
    global REDIS, SRV
    REDIS, SRV = support.shared()


class TestAsync(unittest.IsolatedAsyncioTestCase):
    async def test_holds_renews_and_releases(self):
        c, n = dlockd.Client(SRV.url), name("async")
        async with c.lock(n, ttl_ms=600, wait_ms=1000) as held:
            await asyncio.sleep(1.5)             # more than two leases
            self.assertTrue(held.held)
            body = await asyncio.to_thread(call, SRV.url, "GET", f"/locks/{n}?owner={held.owner}")
            self.assertTrue(body[1]["held"])
        self.assertFalse(held.held)
        self.assertEqual(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"], False)

    async def test_the_body_is_cancelled_on_loss(self):
        c, n = dlockd.Client(SRV.url), name("asynclost")
        reached = []
        with self.assertRaises(dlockd.LeaseLost):
            async with c.lock(n, ttl_ms=15000) as held:
                await asyncio.sleep(0.2)
                t0 = time.monotonic()
                await asyncio.to_thread(call, SRV.url, "DELETE", f"/locks/{n}?force=true")
                await asyncio.sleep(10)
                reached.append(1)
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertEqual(reached, [])
        self.assertTrue(held.lost.is_set())
        self.assertFalse(asyncio.current_task().cancelling())

    async def test_a_cancelled_wait_gives_back_its_queue_place(self):
        c, n = dlockd.Client(SRV.url), name("asyncq")
        async with c.fair_lock(n) as first:
            async def wait():
                async with c.fair_lock(n, wait_ms=20000):
                    self.fail("granted while held")
            task = asyncio.create_task(wait())
            for _ in range(500):
                await asyncio.sleep(0.01)
                st = await asyncio.to_thread(call, SRV.url, "GET", f"/fairlocks/{n}")
                if st[1]["queue_length"] == 1:
                    break
            self.assertEqual(st[1]["queue_length"], 1)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            t0 = time.monotonic()
            while (await asyncio.to_thread(call, SRV.url, "GET", f"/fairlocks/{n}"))[1][
                    "queue_length"] and time.monotonic() - t0 < 5:
                await asyncio.sleep(0.01)
            self.assertLess(time.monotonic() - t0, 1.0, "the place is given back at once")
            self.assertTrue(first.held)
        self.assertEqual(call(SRV.url, "GET", f"/fairlocks/{n}")[1]["locked"], False)

    async def test_a_cancelled_body_releases(self):
        c, n = dlockd.Client(SRV.url), name("asynccancel")
        started = asyncio.Event()

        async def body():
            async with c.lock(n):
                started.set()
                await asyncio.sleep(30)
        task = asyncio.create_task(body())
        await started.wait()
        self.assertTrue(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"])
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertEqual(call(SRV.url, "GET", f"/locks/{n}")[1]["locked"], False)

    async def test_errors_are_typed(self):
        c, n = dlockd.Client(SRV.url), name("asyncerr")
        async with c.lock(n):
            with self.assertRaises(dlockd.Conflict):
                async with c.lock(n, wait_ms=100):
                    pass


if __name__ == "__main__":
    unittest.main()
