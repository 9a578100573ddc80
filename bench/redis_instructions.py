#!/usr/bin/env python3
"""redis_instructions.py -- what a lock cycle through dlockd costs Redis,
counted in instructions (valgrind's callgrind on redis-server), so that
neither the machine's load nor its speed moves the figure.

    python3 bench/redis_instructions.py [--cycles N] [--kind locks] [--read]
                                        [--annotate N] BIN...

For each dlockd binary BIN: two runs of a fresh redis-server under
callgrind (`--hz 1`: its timers cost next to nothing) and BIN on it, one
client doing 20 acquire/release cycles to load the library and then
N more (--cycles, 1000) in the second run; the difference of the two
runs' totals over N is one cycle's instructions, everything Redis does
for it (reading, the scripts, their commands, answering). --kind rwlocks
takes the write side, --read the read side; --annotate N prints the N
functions of redis-server that cost the second run most
(callgrind_annotate), to see where a script's cost goes. It needs
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


def cycles(port, kind, side, n):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
    for i in range(n):
        name = 'ri%d' % (i % 16)
        path = '/%s/%s%s' % (kind, name, '/' + side if kind == 'rwlocks' else '')
        for method in ('PUT', 'DELETE'):
            c.request(method, path + '?owner=o')
            r = c.getresponse()
            r.read()
            if r.status != 200:
                sys.exit('%s %s: %d' % (method, path, r.status))
    c.close()


def run(binary, kind, side, n, work, annotate=0):
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
        cycles(hport, kind, side, 20 + n)
    finally:
        if dlockd:
            dlockd.terminate()
            dlockd.wait()
        redis.terminate()	# SIGTERM: redis-server exits, callgrind writes out
        redis.wait()
    with open(out) as f:
        m = re.search(r'^totals: (\d+)', f.read(), re.M)
    if annotate:
        report = subprocess.run(['callgrind_annotate', '--inclusive=no', out],
                                capture_output=True, text=True).stdout
        rows = [l for l in report.splitlines() if re.match(r'^\s*[\d,]+ \(', l)]
        print('\n'.join(rows[1:1 + annotate]))
    os.unlink(out)
    if not m:
        sys.exit('no totals in callgrind output')
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--cycles', type=int, default=1000)
    ap.add_argument('--kind', default='locks', choices=['locks', 'fairlocks', 'rwlocks'])
    ap.add_argument('--read', action='store_true', help='rwlocks: the read side')
    ap.add_argument('--annotate', type=int, default=0)
    ap.add_argument('bins', nargs='+')
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        for b in a.bins:
            side = 'read' if a.read else 'write'
            base = run(b, a.kind, side, 0, work)
            more = run(b, a.kind, side, a.cycles, work, a.annotate)
            what = a.kind.rstrip('s') + (' ' + side if a.kind == 'rwlocks' else '')
            print('%s: %d redis-server instructions a %s cycle'
                  % (b, (more - base) // a.cycles, what))


if __name__ == '__main__':
    main()
