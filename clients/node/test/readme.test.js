// readme.test.js -- README.md shows only what is run: each js block is
// run (as a module of this package, so that 'dlockd' is this one) against
// a real dlockd, and its output compared with the text block after it;
// the install step is carried out in a new project, offline.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync, rmSync, mkdtempSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as h from './harness.js';

const run = promisify(execFile);
const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const readme = readFileSync(join(pkg, 'README.md'), 'utf8');
let url;

before(async () => {
  const redisPort = await h.freePort();
  await h.startRedis(redisPort);
  url = (await h.startDlockd(redisPort)).base;
});
after(() => h.stopAll());

const blocks = [...readme.matchAll(/```js\n([\s\S]*?)```\n\n```text\n([\s\S]*?)```/g)];

test('every js block of README.md has its output shown', () => {
  assert.equal(blocks.length, (readme.match(/```js\n/g) ?? []).length);
  assert.ok(blocks.length >= 3);
});

blocks.forEach(([, code, output], i) => {
  test(`README.md example ${i + 1} prints what it shows`, { timeout: 30000 }, async () => {
    const file = join(pkg, `.readme-example-${process.pid}-${i}.mjs`);
    writeFileSync(file, code);
    try {
      const { stdout } = await run(process.execPath, [file], { env: { ...process.env, DLOCKD_URL: url } });
      assert.equal(stdout, output);
    } finally {
      rmSync(file, { force: true });
    }
  });
});

// docs/guides/sessions.md's Node example (marked not-run there: this runs it)
test('the sessions guide\'s Node example runs', { timeout: 30000 }, async () => {
  const guide = readFileSync(resolve(pkg, '../../docs/guides/sessions.md'), 'utf8');
  const node = guide.slice(guide.indexOf('### Node\n'));
  const code = /```js\n([\s\S]*?)```/.exec(node)[1];
  const file = join(pkg, `.guide-example-${process.pid}.mjs`);
  writeFileSync(file, code);
  try {
    const { stdout } = await run(process.execPath, [file], { env: { ...process.env, DLOCKD_URL: url } });
    assert.equal(stdout, 'fencing tokens: true\n');
  } finally {
    rmSync(file, { force: true });
  }
});

test('README.md install step', { timeout: 60000 }, async () => {
  const steps = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)];
  assert.equal(steps.length, 1);
  const dir = mkdtempSync(join(h.dir, 'app-'));
  writeFileSync(join(dir, 'package.json'), '{"name":"app","version":"1.0.0","type":"module"}\n');
  const repo = resolve(pkg, '../..');
  await run('sh', ['-ec', steps[0][1].replaceAll('/path/to/dlockd', repo)], {
    cwd: dir, env: { ...process.env, npm_config_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' },
  });
  writeFileSync(join(dir, 'main.mjs'), "import { Client } from 'dlockd';\nconsole.log(typeof new Client().acquire);\n");
  const { stdout } = await run(process.execPath, [join(dir, 'main.mjs')], { cwd: dir });
  assert.equal(stdout, 'function\n');
});

// No TypeScript compiler here: at least every export, and every public
// method of the classes, must be declared.
test('index.d.ts declares every export and public method', async () => {
  const dts = readFileSync(join(pkg, 'index.d.ts'), 'utf8');
  const mod = await import('../index.js');
  for (const [name, value] of Object.entries(mod)) {
    assert.match(dts, new RegExp(`export declare (const|class) ${name}\\b`), `export ${name}`);
    if (typeof value !== 'function') continue;
    const body = dts.slice(dts.indexOf(`class ${name}`)).split('\n}')[0];
    for (const m of Object.getOwnPropertyNames(value.prototype)) {
      if (m === 'constructor' || m.startsWith('_')) continue;
      assert.match(body, new RegExp(`\\b(readonly )?${m}[(:<?]`), `${name}.${m}`);
    }
  }
});

// The Kind union of index.d.ts names every kind acquire() takes (its
// TypeError on an unknown kind lists them).
test('index.d.ts declares every kind', async () => {
  const dts = readFileSync(join(pkg, 'index.d.ts'), 'utf8');
  const { Client } = await import('../index.js');
  const err = await new Client().acquire('x', { kind: '?' }).catch((e) => e);
  const kinds = /\(([^)]*)\)$/.exec(err.message)[1].split(', ');
  assert.ok(kinds.includes('semaphore'));
  const declared = /export type Kind = ([^;]*);/.exec(dts)[1].split(' | ').map((k) => k.replaceAll("'", ''));
  assert.deepEqual(declared.sort(), kinds.sort());
  assert.match(dts.slice(dts.indexOf('class LimitMismatchError')).split('\n}')[0], /\blimit: number;/);
});
