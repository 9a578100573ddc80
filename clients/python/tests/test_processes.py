"""Separate processes: three contending on one name never overlap (each
logs its entries and exits on CLOCK_MONOTONIC, shared by every process of
the machine, with its fencing token), and Ctrl-C (SIGINT, a
KeyboardInterrupt) gives back a queue place while waiting and the lock
while holding; a process paused past its lease does no step after it
resumes."""
import signal
import subprocess
import time
import unittest

from . import support
from .support import call, name, wait_for

CONTENDER = r"""
import sys, time, dlockd
c = dlockd.Client(sys.argv[1])
for _ in range(int(sys.argv[3])):
    with c.lock(sys.argv[2], ttl_ms=3000, wait_ms=30000) as held:
        print("in", time.monotonic(), held.fencing_token, flush=True)
        time.sleep(0.02)
        print("out", time.monotonic(), held.fencing_token, flush=True)
"""

WAITER = r"""
import sys, dlockd
c = dlockd.Client(sys.argv[1])
print("waiting", flush=True)
try:
    with c.fair_lock(sys.argv[2], wait_ms=30000) as held:
        print("holding", held.fencing_token, flush=True)
        import time; time.sleep(30)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""

# Steps each guarded by held.check() ("check") or held.held ("held"); a
# step's line carries the time its guard began.
PAUSED = r"""
import sys, time, dlockd
c = dlockd.Client(sys.argv[1], watch_held=False)
try:
    with c.lock(sys.argv[2], ttl_ms=1000) as held:
        print("holding", flush=True)
        while True:
            t = time.monotonic()
            if sys.argv[3] == "check":
                held.check()
            elif not held.held:
                break
            print("step", t, flush=True)
            time.sleep(0.005)
    print("ended", flush=True)
except dlockd.LeaseLost:
    print("lost", flush=True)
"""


def setUpModule():
    global REDIS, SRV
    REDIS, SRV = support.shared()


class TestProcesses(unittest.TestCase):
    def test_three_processes_never_overlap(self):
        n, rounds = name("three"), 8
        procs = [subprocess.Popen([support.PYTHON, "-c", CONTENDER, SRV.url, n, str(rounds)],
                                  stdout=subprocess.PIPE, text=True, env=support.python_env())
                 for _ in range(3)]
        events = []
        for p in procs:
            out, _ = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0)
            lines = [l.split() for l in out.splitlines()]
            self.assertEqual(len(lines), 2 * rounds)
            events += [(float(t), what, int(tok)) for what, t, tok in lines]
        events.sort()
        inside = None
        tokens = []
        for t, what, tok in events:
            if what == "in":
                self.assertIsNone(inside, f"token {tok} entered at {t} while {inside} was inside")
                inside = tok
                tokens.append(tok)
            else:
                self.assertEqual(inside, tok)
                inside = None
        self.assertEqual(len(tokens), 3 * rounds)
        self.assertEqual(tokens, sorted(tokens), "fencing tokens grow in the order of entry")

    def _start_waiter(self, n):
        # SIGINT as a terminal gives it: a shell's background job (make test
        # started with &, nohup) ignores it, and Python then never raises
        # KeyboardInterrupt
        p = subprocess.Popen([support.PYTHON, "-c", WAITER, SRV.url, n], stdout=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                             text=True, env=support.python_env())
        self.addCleanup(p.stdout.close)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.assertEqual(p.stdout.readline().strip(), "waiting")
        return p

    def test_ctrl_c_while_waiting_gives_back_the_queue_place(self):
        n = name("sigwait")
        self.assertEqual(call(SRV.url, "PUT", f"/fairlocks/{n}?owner=holder&ttl_ms=20000")[0], 200)
        p = self._start_waiter(n)
        self.assertTrue(wait_for(lambda: call(SRV.url, "GET", f"/fairlocks/{n}")[1]
                                 ["queue_length"] == 1, 10))
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(30), 130)  # generous: 2 loaded cores
        t0 = time.monotonic()
        self.assertTrue(wait_for(lambda: call(SRV.url, "GET", f"/fairlocks/{n}")[1]
                                 ["queue_length"] == 0, 5))
        self.assertLess(time.monotonic() - t0, 1.0)
        call(SRV.url, "DELETE", f"/fairlocks/{n}?owner=holder")

    def test_ctrl_c_while_holding_releases(self):
        n = name("sighold")
        p = self._start_waiter(n)
        self.assertTrue(p.stdout.readline().startswith("holding"))
        self.assertTrue(call(SRV.url, "GET", f"/fairlocks/{n}")[1]["locked"])
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(30), 130)  # generous: 2 loaded cores
        self.assertEqual(call(SRV.url, "GET", f"/fairlocks/{n}")[1]["locked"], False,
                         "released on the way out, not left to its lease")

    def test_a_process_paused_past_its_lease_does_no_step_after_it_resumes(self):
        # SIGSTOP 0.3 s into a 1 s lease, SIGCONT at 1.8 s: whichever thread
        # runs first, the body's next guard must stop it, and the scope
        # must say LeaseLost. check() and the scope's end read only the
        # flag the renewal thread sets: a probe saw a step after SIGCONT in
        # 6 of 8 runs, and a scope that ended normally in 8 of 10.
        for guard in ("check", "held"):
            n = name("paused")
            p = subprocess.Popen([support.PYTHON, "-c", PAUSED, SRV.url, n, guard],
                                 stdout=subprocess.PIPE, text=True, env=support.python_env())
            self.addCleanup(p.stdout.close)
            self.addCleanup(lambda p=p: p.poll() is None and (p.kill(), p.wait()))
            self.assertEqual(p.stdout.readline().strip(), "holding")
            time.sleep(0.3)
            p.send_signal(signal.SIGSTOP)
            time.sleep(1.5)
            resumed = time.monotonic()
            p.send_signal(signal.SIGCONT)
            out, _ = p.communicate(timeout=30)
            lines = out.split("\n")
            late = [l for l in lines if l.startswith("step") and float(l.split()[1]) > resumed]
            self.assertEqual(late, [], f"{guard}: steps begun after SIGCONT")
            self.assertIn("lost", lines, f"{guard}: the scope says LeaseLost: {lines[-3:]}")


if __name__ == "__main__":
    unittest.main()
