// harness.js -- what the tests run against: a real redis-server and real
// dlockd processes on free loopback ports (DLOCKD_BIN, else
// ../../build/dlockd), certificates made with openssl, and a proxy in
// front of dlockd that can lose answers, drop heartbeats and log what
// passes.
import { spawn, execFileSync } from 'node:child_process';
import {
  appendFileSync, mkdtempSync, mkdirSync, openSync, writeFileSync, rmSync, readFileSync,
} from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';

import { Client } from '../index.js';

const here = dirname(fileURLToPath(import.meta.url));
export const ADMIN_TOKEN = 'c28a7d41e95f4b60a3e8d1f7b2c90e56';
export const CLIENT_TOKEN = '6f1c0e9a52d84b7e9c13a0f2d5b8e471';
export const dir = mkdtempSync(join(tmpdir(), 'dlockd-node-'));
const procs = [];

export function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.on('error', rej);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => res(port)); });
  });
}

function spawnLogged(log, cmd, args) {
  const fd = openSync(join(dir, log), 'a');
  const p = spawn(cmd, args, { stdio: ['ignore', fd, fd] });
  p.exited = new Promise((r) => p.on('exit', r));
  procs.push(p);
  return p;
}

export async function startRedis(port) {
  const rdir = join(dir, `redis-${port}`);
  mkdirSync(rdir, { recursive: true });
  const p = spawnLogged(`redis-${port}.log`, 'redis-server', ['--port', String(port), '--bind', '127.0.0.1',
    '--dir', rdir, '--save', '', '--appendonly', 'no', '--daemonize', 'no']);
  for (let i = 0; i < 500 && p.exitCode === null; i++) {
    const pong = await new Promise((res) => {
      const c = net.connect(port, '127.0.0.1', () => c.write('PING\r\n'));
      c.on('data', (d) => { res(String(d).startsWith('+PONG')); c.destroy(); });
      c.on('error', () => res(false));
    });
    if (pong) return p;
    await delay(20);
  }
  throw new Error(`redis-server on port ${port} did not start`);
}

export const dlockdBin = () => (process.env.DLOCKD_BIN ? resolve(process.env.DLOCKD_BIN)
  : resolve(here, '../../../build/dlockd'));

export async function startDlockd(redisPort, flags = [], tls = null) {
  const port = await freePort();
  const p = spawnLogged(`dlockd-${port}.log`, dlockdBin(), ['--listen', `127.0.0.1:${port}`, '--redis',
    `redis://127.0.0.1:${redisPort}/0`, '--log-level', 'warn', ...flags]);
  const base = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  for (let i = 0; i < 1000 && p.exitCode === null; i++) {
    const ok = await new Promise((res) => {
      const req = (tls ? https : http).get(`${base}/healthz`, { ...(tls ?? {}), agent: false }, (r) => {
        r.resume();
        res(r.statusCode === 200);
      });
      req.on('error', () => res(false));
    });
    if (ok) return { base, proc: p };
    await delay(20);
  }
  throw new Error(`dlockd did not start; see ${dir}/dlockd-${port}.log`);
}

// ca.pem, server.pem/key (127.0.0.1), client.pem/key (client auth), with openssl
export function makePKI() {
  const sh = (args) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  sh(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
    '-keyout', 'ca.key', '-out', 'ca.pem', '-subj', '/CN=node test CA']);
  const leaf = (name, ext) => {
    writeFileSync(join(dir, `${name}.ext`), ext);
    sh(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`,
      '-out', `${name}.csr`, '-subj', `/CN=node test ${name}`]);
    sh(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
      '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.pem`]);
  };
  leaf('server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  leaf('client', 'extendedKeyUsage=clientAuth\n');
  const f = (n) => readFileSync(join(dir, n));
  return { ca: f('ca.pem'), cert: f('client.pem'), key: f('client.key') };
}

export async function stopAll() {
  for (const p of procs) {
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGTERM');
      const t = setTimeout(() => p.kill('SIGKILL'), 5000);
      await p.exited;
      clearTimeout(t);
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

// Clients for a test file: client(opts) makes one whose every answer goes
// to the contract log (DLOCKD_CONTRACT_LOG, when set) and whose holdings
// giveBack() releases at the end (a held lock keeps renewing, and the
// process alive, until released).
export function recordingClients() {
  const clients = [];
  const helds = [];
  const client = (opts) => {
    const c = new Client(opts);
    const call = c._call.bind(c);
    c._call = async (method, path, options) => {
      const a = await call(method, path, options);
      if (process.env.DLOCKD_CONTRACT_LOG) {
        appendFileSync(process.env.DLOCKD_CONTRACT_LOG, `${JSON.stringify({
          method, path, status: a.status, content_type: a.contentType ?? '',
          body: typeof a.body === 'string' ? a.body : JSON.stringify(a.body),
        })}\n`);
      }
      return a;
    };
    const acquire = c.acquire.bind(c);
    c.acquire = async (...args) => { const held = await acquire(...args); helds.push(held); return held; };
    clients.push(c);
    return c;
  };
  const giveBack = async () => {
    await Promise.allSettled(helds.map((held) => held.release()));
    clients.forEach((c) => c.close());
  };
  return { client, giveBack };
}

// A proxy in front of target, logging "METHOD path status" in order.
export async function proxy(target) {
  // lastBeat: when (performance.now) the last heartbeat answered 200 arrived here
  const p = { log: [], dropAnswers: 0, delayPutMs: 0, dropBeats: false, failWatch: false, lastBeat: 0 };
  const server = http.createServer(async (req, res) => {
    const arrived = performance.now();
    const url = new URL(req.url, 'http://x');
    const entry = (s) => p.log.push(`${req.method} ${url.pathname} ${s}`);
    if (url.pathname.endsWith('/heartbeat') && p.dropBeats) {
      entry('cut');
      req.socket.destroy();
      return;
    }
    if (req.method === 'GET' && url.searchParams.has('index') && p.failWatch) {
      entry('503');
      res.writeHead(503, { 'Retry-After': '1', 'Content-Type': 'application/json' });
      res.end('{"error":"backend_unavailable","message":"the test proxy says no"}');
      return;
    }
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const ac = new AbortController();
    res.on('close', () => res.writableFinished || ac.abort()); // a client that hangs up hangs up on dlockd too
    let upstream;
    try {
      upstream = await fetch(target + req.url, {
        method: req.method, headers: Object.fromEntries(Object.entries(req.headers)
          .filter(([k]) => !['host', 'connection', 'content-length'].includes(k))),
        body: chunks.length ? Buffer.concat(chunks) : undefined, signal: ac.signal,
      });
    } catch {
      entry('error');
      req.socket.destroy();
      return;
    }
    const body = Buffer.from(await upstream.arrayBuffer());
    entry(upstream.status);
    if (url.pathname.endsWith('/heartbeat') && upstream.status === 200) p.lastBeat = Math.max(p.lastBeat, arrived);
    if (req.method === 'PUT') {
      if (p.delayPutMs) await delay(p.delayPutMs);
      if (p.dropAnswers > 0) {
        p.dropAnswers--;
        req.socket.destroy();
        return;
      }
    }
    const headers = { 'Content-Type': 'application/json' };
    const ra = upstream.headers.get('retry-after');
    if (ra) headers['Retry-After'] = ra;
    res.writeHead(upstream.status, headers);
    res.end(body);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  p.url = `http://127.0.0.1:${server.address().port}`;
  p.count = (prefix) => p.log.filter((e) => e.startsWith(prefix)).length;
  p.close = () => { server.closeAllConnections(); server.close(); };
  return p;
}
