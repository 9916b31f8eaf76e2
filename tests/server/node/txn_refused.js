// B1 through ioredis and node-redis (tests/server/test_txn_node_clients.py):
// a transaction with one argument over the server's max_bulk must fail as a
// whole, with nothing applied. Usage: node txn_refused.js PORT MAX_BULK
// (NODE_PATH names the folder holding ioredis and redis). Prints one JSON
// line per client: {client, error, result, exists}.
'use strict';
const port = Number(process.argv[2]);
const big = 'x'.repeat(Number(process.argv[3]) + 1);

async function viaIoredis() {
  const Redis = require('ioredis');
  const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
  await r.del('a', 'b', 'c');
  let error = null, result = null;
  try {
    result = await r.multi().set('a', '1').set('b', big).set('c', '3').exec();
  } catch (e) {
    error = String(e.message || e);
  }
  const exists = await r.exists('a', 'b', 'c');
  r.disconnect();
  return { client: 'ioredis', error, result, exists };
}

async function viaNodeRedis() {
  const { createClient } = require('redis');
  const r = createClient({ socket: { port, host: '127.0.0.1' } });
  r.on('error', () => {});
  await r.connect();
  await r.del(['a', 'b', 'c']);
  let error = null, result = null;
  try {
    result = await r.multi().set('a', '1').set('b', big).set('c', '3').exec();
  } catch (e) {
    error = String(e.message || e);
  }
  const exists = await r.exists(['a', 'b', 'c']);
  await r.quit();
  return { client: 'node-redis', error, result, exists };
}

(async () => {
  for (const f of [viaIoredis, viaNodeRedis])
    console.log(JSON.stringify(await f()));
})().catch((e) => { console.error(e); process.exit(1); });
