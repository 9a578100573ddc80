#!/usr/bin/env python3
"""redis_instructions.py -- what a lock cycle through dlockd costs Redis,
counted in instructions (valgrind's callgrind on redis-server), so that
neither the machine's load nor its speed moves the figure.

    python3 bench/redis_instructions.py [--cycles N] [--kind locks] BIN...

For each dlockd binary BIN: two runs of a fresh redis-server under
callgrind (`--hz 1`: its timers cost next to nothing) and BIN on it, one
client doing 20 acquire/release cycles to load the library and then
N more (--cycles, 1000) in the second run; the difference of the two
runs' totals over N is one cycle's instructions, everything Redis does
for it (reading, the scripts, their commands, answering). It needs
valgrind; it takes about a minute a binary. Only loopback ports it finds
free; it stops only the processes it started.
"""
import argparse
import http.client
import os
import re
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_port(port, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def cycles(port, kind, n):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
    for i in range(n):
        name = 'ri%d' % (i % 16)
        path = '/%s/%s%s' % (kind, name, '/write' if kind == 'rwlocks' else '')
        for method in ('PUT', 'DELETE'):
            c.request(method, path + '?owner=o')
            r = c.getresponse()
            r.read()
            if r.status != 200:
                sys.exit('%s %s: %d' % (method, path, r.status))
    c.close()


def run(binary, kind, n, work):
    """Redis' instructions over a run of 20 + n cycles through binary."""
    rport, hport = free_port(), free_port()
    out = os.path.join(work, 'cg.out')
    redis = subprocess.Popen(['valgrind', '--tool=callgrind', '--callgrind-out-file=' + out,
                              'redis-server', '--port', str(rport), '--bind', '127.0.0.1',
                              '--save', '', '--appendonly', 'no', '--hz', '1'],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dlockd = None
    try:
        if not wait_port(rport, 60):
            sys.exit('redis-server under valgrind did not start')
        dlockd = subprocess.Popen([binary, '--listen', '127.0.0.1:%d' % hport,
                                   '--redis', 'redis://127.0.0.1:%d' % rport],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_port(hport, 30):
            sys.exit('%s did not start' % binary)
        cycles(hport, kind, 20 + n)
    finally:
        if dlockd:
            dlockd.terminate()
            dlockd.wait()
        redis.terminate()	# SIGTERM: redis-server exits, callgrind writes out
        redis.wait()
    with open(out) as f:
        m = re.search(r'^totals: (\d+)', f.read(), re.M)
    os.unlink(out)
    if not m:
        sys.exit('no totals in callgrind output')
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--cycles', type=int, default=1000)
    ap.add_argument('--kind', default='locks', choices=['locks', 'fairlocks', 'rwlocks'])
    ap.add_argument('bins', nargs='+')
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        for b in a.bins:
            base, more = run(b, a.kind, 0, work), run(b, a.kind, a.cycles, work)
            print('%s: %d redis-server instructions a %s cycle'
                  % (b, (more - base) // a.cycles, a.kind.rstrip('s')))


if __name__ == '__main__':
    main()
