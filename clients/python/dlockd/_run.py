"""_run.py -- the two drivers of _core's generators: run_sync on the
calling thread (blocking HTTP, threading events), run_async on the running
asyncio loop (asyncio streams and events). Each takes the signals of a
holding (ThreadSignals, LoopSignals) for the Wait actions, or None."""
import asyncio
import threading
import time

from ._core import Request, Sleep, Unreachable, Wait
from ._http import Tracker


class ThreadSignals:
    """Wakes a holding's renewal thread (nudge, stop) and abandons the
    requests its threads have in flight (stop)."""

    def __init__(self):
        self._renew = threading.Event()
        self._stop = threading.Event()
        self.tracker = Tracker()

    def nudge(self):
        self._renew.set()

    def stop(self):
        self._stop.set()
        self._renew.set()
        self.tracker.close()

    def wait(self, which, seconds):
        if which == "stop":
            return self._stop.wait(seconds)
        woke = self._renew.wait(seconds)
        self._renew.clear()
        return woke


class LoopSignals:
    """The same on an asyncio loop; stop also cancels the tasks it was given
    (their requests are abandoned with them)."""

    def __init__(self):
        self._renew = asyncio.Event()
        self._stop = asyncio.Event()
        self.tasks = []

    def nudge(self):
        self._renew.set()

    def stop(self):
        self._stop.set()
        self._renew.set()
        me = asyncio.current_task()
        for task in self.tasks:
            if task is not me:
                task.cancel()

    async def wait(self, which, seconds):
        event = self._stop if which == "stop" else self._renew
        try:
            async with asyncio.timeout(max(0.0, seconds)):
                await event.wait()
            woke = True
        except TimeoutError:
            woke = False
        if which != "stop":
            self._renew.clear()
        return woke


def run_sync(gen, transport, signals=None):
    res = None
    tracker = signals.tracker if signals else None
    while True:
        try:
            action = gen.send(res)
        except StopIteration as stop:
            return stop.value
        if isinstance(action, Request):
            res = transport.request(action.method, action.path, action.params,
                                    max(0.01, action.timeout), tracker, action.body)
        elif isinstance(action, Sleep):
            time.sleep(max(0.0, action.seconds))
            res = None
        elif isinstance(action, Wait):
            res = signals.wait(action.which, max(0.0, action.seconds)) if signals else False
        else:
            raise TypeError(f"unknown action {action!r}")


async def run_async(gen, transport, signals=None):
    res = None
    while True:
        try:
            action = gen.send(res)
        except StopIteration as stop:
            return stop.value
        if isinstance(action, Request):
            res = await transport.arequest(action.method, action.path, action.params,
                                           max(0.01, action.timeout), action.body)
        elif isinstance(action, Sleep):
            await asyncio.sleep(max(0.0, action.seconds))
            res = None
        elif isinstance(action, Wait):
            res = await signals.wait(action.which, action.seconds) if signals else False
        else:
            raise TypeError(f"unknown action {action!r}")


__all__ = ["ThreadSignals", "LoopSignals", "run_sync", "run_async", "Unreachable"]
