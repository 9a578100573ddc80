#!/usr/bin/env python3
"""peers.py -- dlockd side by side with the locks a user would pick
instead, measured in one run on this machine (`make bench-peers`).

Each peer gets servers of its own on free loopback ports (a redis-server;
dlockd also a dlockd; etcd an etcd), started here and stopped by pid:

  dlockd           PUT/DELETE /locks/{name} over HTTP keep-alive
  redisson-floor   Redisson's own lock/unlock scripts (RedissonLock's),
                   EVALSHA from redis-py: what a lock costs on Redis at all
  etcd             etcd's v3lock over its HTTP/JSON gateway (a lease per
                   client, /v3/lock/lock and /v3/lock/unlock)
  redis-py         redis-py's Lock (Debian's python3-redis)
  redlock          Node's redlock on ioredis (npm, bench/peers/package.json)
  redis-semaphore  Node's redis-semaphore Mutex on ioredis

For each: uncontended acquire+release cycles/s at 1 and 16 clients (each
client its own name), and the hand-off on one hot lock (8 clients
contending, each holding it 20 ms and waiting 50 ms after its release
before it asks again, so that others wait at every release): the time
from a release (noted just before it is sent) to the next grant, a
waiter's, p50 and p99. The Python-driven peers run one process per
client; the Node peers one process with that many concurrent loops (their
libraries are asynchronous): the drivers differ, which the table says.
Redis-backed libraries that wait by polling (redis-py's Lock sleeps 0.1 s,
redlock retries every 200 ms, redis-semaphore every 10 ms) show it in
their hand-off; dlockd and etcd wake waiters when the lock is released.

A peer that errors or measures nothing makes the run exit 1 naming it.

  python3 bench/peers/peers.py [--dlockd build/dlockd] [--seconds 3]
                               [--json bench/results/peers.json]
"""
import argparse
import base64
import http.client
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

try:
    import redis
except ImportError:  # Debian's python3-redis, under another python3
    sys.path.append('/usr/lib/python3/dist-packages')
    import redis

HERE = os.path.dirname(os.path.abspath(__file__))
HOT_CLIENTS = 8
# On the hot lock a client that released waits this long before it asks
# again, so that the next grant is a waiter's: the hand-off measures how
# soon a waiter learns the lock is free, not how fast one client re-takes.
AFTER_RELEASE_S = 0.05
HOLD_S = 0.02	# how long a hot lock's holder holds it

# RedissonLock's scripts, as bench/bench.c writes them from a reading of
# Redisson (tryLockInnerAsync and unlockInnerAsync).
REDISSON_LOCK = (
    "if ((redis.call('exists', KEYS[1]) == 0) or "
    "(redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "return redis.call('pttl', KEYS[1]);")
REDISSON_UNLOCK = (
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "return nil;")


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_until(check, what, seconds=20):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        try:
            if check():
                return
        except (OSError, redis.exceptions.ConnectionError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f'{what} did not come up')


class Servers:
    """The processes one peer runs against, stopped by pid."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def start(self, argv, log):
        with open(os.path.join(self.tmp, log), 'w') as f:
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=self.tmp)
        self.procs.append(p)
        return p

    def redis(self):
        port = free_port()
        self.start(['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--save', '',
                    '--appendonly', 'no', '--dir', self.tmp], f'redis-{port}.log')
        wait_until(lambda: redis.Redis(host='127.0.0.1', port=port).ping(), 'redis-server')
        return port

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []


def http_json(conn, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {'Content-Type': 'application/json'} if data else {}
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    text = r.read()
    return r.status, (json.loads(text) if text else {})


# ----- The Python peers: acquire(name, client) -> release() -----

def dlockd_client(target, i, hot):
    conn = http.client.HTTPConnection('127.0.0.1', target['port'], timeout=60)
    wait = '&wait_ms=30000' if hot else ''

    def acquire(name):
        st, _ = http_json(conn, 'PUT', f'/locks/{name}?owner=c{i}&ttl_ms=10000{wait}')
        if st != 200:
            raise RuntimeError(f'PUT {st}')

        def release():
            st, _ = http_json(conn, 'DELETE', f'/locks/{name}?owner=c{i}')
            if st != 200:
                raise RuntimeError(f'DELETE {st}')
        return release
    return acquire


def redisson_client(target, i, hot):
    r = redis.Redis(host='127.0.0.1', port=target['port'])
    lock_sha = r.script_load(REDISSON_LOCK)
    unlock_sha = r.script_load(REDISSON_UNLOCK)
    owner = f'c{i}:1'
    ps = None

    def acquire(name):
        nonlocal ps
        channel = f'redisson_lock__channel:{{{name}}}'
        while True:
            ttl = r.evalsha(lock_sha, 1, name, 10000, owner)
            if ttl is None:
                break
            if ps is None:  # RedissonLock subscribes, then tries again
                ps = r.pubsub(ignore_subscribe_messages=True)
                ps.subscribe(channel)
                continue
            ps.get_message(timeout=min(ttl, 30000) / 1000.0)

        def release():
            r.evalsha(unlock_sha, 2, name, channel, 0, 10000, owner)
        return release
    return acquire


def etcd_client(target, i, hot):
    conn = http.client.HTTPConnection('127.0.0.1', target['port'], timeout=60)
    st, lease = http_json(conn, 'POST', '/v3/lease/grant', {'TTL': 60})
    if st != 200:
        raise RuntimeError(f'lease grant {st}')

    def acquire(name):
        st, got = http_json(conn, 'POST', '/v3/lock/lock',
                            {'name': base64.b64encode(name.encode()).decode(), 'lease': lease['ID']})
        if st != 200 or 'key' not in got:
            raise RuntimeError(f'lock {st} {got}')

        def release():
            st, _ = http_json(conn, 'POST', '/v3/lock/unlock', {'key': got['key']})
            if st != 200:
                raise RuntimeError(f'unlock {st}')
        return release
    return acquire


def redispy_client(target, i, hot):
    r = redis.Redis(host='127.0.0.1', port=target['port'])

    def acquire(name):
        lock = r.lock(name, timeout=10, blocking_timeout=30)
        if not lock.acquire():
            raise RuntimeError('not acquired in 30 s')
        return lock.release
    return acquire


PY_PEERS = {'dlockd': dlockd_client, 'redisson-floor': redisson_client, 'etcd': etcd_client,
            'redis-py': redispy_client}


def py_worker(peer, target, i, hot, seconds, q):
    out = {'cycles': 0, 'grants': [], 'errors': 0, 'first_error': None}
    try:
        acquire = PY_PEERS[peer](target, i, hot)
    except Exception as e:  # noqa: BLE001 -- reported as the peer's error
        out['errors'] += 1
        out['first_error'] = repr(e)
        q.put(out)
        return
    name = 'peers-hot' if hot else f'peers-{i}'
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        try:
            release = acquire(name)
            granted = time.time() * 1000
            if hot:
                time.sleep(HOLD_S)  # the others are waiting by now
            released = time.time() * 1000
            release()
            out['cycles'] += 1
            if hot:
                out['grants'].append((granted, released))
                time.sleep(AFTER_RELEASE_S)  # the next grant goes to a waiter
        except Exception as e:  # noqa: BLE001
            out['errors'] += 1
            out['first_error'] = out['first_error'] or repr(e)
    q.put(out)


def run_python(peer, target, clients, hot, seconds):
    ctx = mp.get_context('fork')
    q = ctx.Queue()
    ps = [ctx.Process(target=py_worker, args=(peer, target, i, hot, seconds, q))
          for i in range(clients)]
    for p in ps:
        p.start()
    outs = [q.get(timeout=seconds + 120) for _ in ps]
    for p in ps:
        p.join()
    return merge(outs)


def run_node(peer, target, clients, hot, seconds, tmp):
    out = os.path.join(tmp, f'{peer}-{clients}-{int(hot)}.json')
    subprocess.run(['node', os.path.join(HERE, 'node_peer.mjs'), peer, str(target['port']),
                    'handoff' if hot else 'cycles', str(clients), str(seconds), out],
                   check=True, timeout=seconds + 120)
    with open(out) as f:
        got = json.load(f)
    got['first_error'] = None
    return merge([got])


def merge(outs):
    m = {'cycles': 0, 'grants': [], 'errors': 0, 'first_error': None}
    for o in outs:
        m['cycles'] += o['cycles']
        m['grants'] += [tuple(g) for g in o['grants']]
        m['errors'] += o['errors']
        m['first_error'] = m['first_error'] or o.get('first_error')
    return m


def handoffs(grants):
    """Release-to-next-grant times (ms) of one hot lock's grants."""
    g = sorted(grants)
    times = sorted(g[k + 1][0] - g[k][1] for k in range(len(g) - 1))
    if not times:
        return None, None
    return times[len(times) // 2], times[min(len(times) - 1, len(times) * 99 // 100)]


def start_peer(peer, servers, dlockd_bin):
    if peer == 'etcd':
        port, peer_port = free_port(), free_port()
        servers.start(['etcd', '--data-dir', os.path.join(servers.tmp, 'etcd'),
                       '--listen-client-urls', f'http://127.0.0.1:{port}',
                       '--advertise-client-urls', f'http://127.0.0.1:{port}',
                       '--listen-peer-urls', f'http://127.0.0.1:{peer_port}',
                       '--initial-advertise-peer-urls', f'http://127.0.0.1:{peer_port}',
                       '--initial-cluster', f'default=http://127.0.0.1:{peer_port}'], 'etcd.log')

        def up():
            c = http.client.HTTPConnection('127.0.0.1', port, timeout=2)
            st, _ = http_json(c, 'GET', '/health')
            return st == 200
        wait_until(up, 'etcd')
        return {'port': port}
    rport = servers.redis()
    if peer != 'dlockd':
        return {'port': rport}
    port = free_port()
    servers.start([dlockd_bin, '--listen', f'127.0.0.1:{port}', '--redis',
                   f'redis://127.0.0.1:{rport}/0', '--log-level', 'warn'], 'dlockd.log')

    def ready():
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=2)
        st, _ = http_json(c, 'GET', '/readyz')
        return st == 200
    wait_until(ready, 'dlockd')
    return {'port': port}


PEERS = ['dlockd', 'redisson-floor', 'etcd', 'redis-py', 'redlock', 'redis-semaphore']
NODE_PEERS = {'redlock', 'redis-semaphore'}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--dlockd', default='build/dlockd')
    ap.add_argument('--seconds', type=float, default=3.0)
    ap.add_argument('--json', default='bench/results/peers.json')
    ap.add_argument('--only', default=None, help='peers whose name contains it')
    a = ap.parse_args()
    dlockd_bin = os.path.abspath(a.dlockd)
    tmp = tempfile.mkdtemp(prefix='dlockd-peers.')
    rows, failed = [], []
    for peer in PEERS:
        if a.only and a.only not in peer:
            continue
        servers = Servers(tmp if peer != 'etcd' else tempfile.mkdtemp(dir=tmp))
        row = {'peer': peer, 'driver': 'node, one process' if peer in NODE_PEERS
               else 'python, a process per client'}
        try:
            target = start_peer(peer, servers, dlockd_bin)
            for clients, hot, key in ((1, False, 'cycles_per_s_1'), (16, False, 'cycles_per_s_16'),
                                      (HOT_CLIENTS, True, 'handoff')):
                if peer in NODE_PEERS:
                    m = run_node(peer, target, clients, hot, a.seconds, tmp)
                else:
                    m = run_python(peer, target, clients, hot, a.seconds)
                if m['errors'] or m['cycles'] == 0:
                    raise RuntimeError(f'{key}: {m["cycles"]} cycles, {m["errors"]} errors'
                                       f' ({m["first_error"]})')
                if hot:
                    row['handoff_p50_ms'], row['handoff_p99_ms'] = handoffs(m['grants'])
                    row['handoffs_per_s'] = m['cycles'] / a.seconds
                else:
                    row[key] = m['cycles'] / a.seconds
        except Exception as e:  # noqa: BLE001 -- the run says which peer failed
            failed.append(f'{peer}: {e}')
            print(f'peers: {peer} failed: {e}', file=sys.stderr)
        finally:
            servers.stop()
        rows.append(row)
        print(f'peers: {peer} done', file=sys.stderr)
    print('| peer | cycles/s, 1 client | cycles/s, 16 clients | hand-off p50 | hand-off p99 '
          '| driver |')
    print('|---|---:|---:|---:|---:|---|')
    for r in rows:
        f = lambda k, u: f'{r[k]:.1f}{u}' if r.get(k) is not None else 'failed'  # noqa: E731
        print(f"| {r['peer']} | {f('cycles_per_s_1', '')} | {f('cycles_per_s_16', '')} | "
              f"{f('handoff_p50_ms', ' ms')} | {f('handoff_p99_ms', ' ms')} | {r['driver']} |")
    print(f'\n{os.cpu_count()} cores, {a.seconds:g} s per run, {HOT_CLIENTS} clients on the hot lock')
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, 'w') as f:
        json.dump({'machine': {'cores': os.cpu_count()}, 'seconds_per_run': a.seconds,
                   'hot_clients': HOT_CLIENTS, 'peers': rows, 'failures': failed}, f, indent=1)
    shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        print('peers: failed: ' + '; '.join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
