// contender.js NAME LOG ROUNDS -- one of the processes contending on one
// lock: logs the start and end of each holding (dlockd.test.js checks
// that no two overlap).
import { appendFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { Client } from '../index.js';

const [name, log, rounds] = process.argv.slice(2);
const c = new Client();
for (let i = 0; i < Number(rounds); i++) {
  await c.withLock(name, async (signal, held) => {
    appendFileSync(log, `start ${process.pid} ${held.fencingToken}\n`);
    await delay(15);
    appendFileSync(log, `end ${process.pid} ${held.fencingToken}\n`);
  }, { ttlMs: 5000, waitMs: 40000 });
}
c.close();
