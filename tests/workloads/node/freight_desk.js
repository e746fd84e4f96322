// The unseen program of the V8 closing measurement (tests/v8.rs
// `unseen_program_*`, docs/v8.md), written apart from the other workloads:
// a freight desk quoting shipments on the main thread while a worker
// thread ranks carriers.
//
// Usage: node freight_desk.js <go-file>. Prints "ready", then spins in
// awaitGo() until <go-file> exists; then
// - main thread, each event loop turn: quoteBatch() -> quoteRoute() ->
//   legCost() -> fuelSurcharge() (the leaf, a loop);
// - worker thread "ranker", each turn: rankCarriers() -> sortCarriers() ->
//   Array.prototype.sort -> byReliability() (the comparator) ->
//   reliabilityScore() (the leaf, a loop).
'use strict';

const fs = require('fs');
const { Worker, isMainThread, workerData } = require('worker_threads');

let ledger = 0;

function fuelSurcharge(distance, weight) {
  let rate = 17;
  for (let km = 0; km < distance; km++) rate = (rate * 13 + weight + km) % 65521;
  return rate;
}

function legCost(leg) {
  const base = leg.distance * 3 + leg.weight;
  return base + fuelSurcharge(leg.distance, leg.weight);
}

function quoteRoute(route) {
  let total = 0;
  for (const leg of route) total += legCost(leg);
  return total;
}

function quoteBatch() {
  const route = [];
  for (let i = 0; i < 4; i++) route.push({ distance: 400 + ((ledger + i) & 63), weight: 7 + i });
  for (let n = 0; n < 40; n++) ledger = (ledger + quoteRoute(route)) & 0xffffff;
  setImmediate(quoteBatch);
}

const carriers = [];
for (let i = 0; i < 48; i++) carriers.push({ id: i, delays: (i * 37) % 48, trips: 500 + i });

function reliabilityScore(carrier) {
  let score = carrier.trips;
  for (let t = 0; t < 300; t++) score = (score * 7 + carrier.delays + t) % 10007;
  return score;
}

function byReliability(left, right) {
  return reliabilityScore(left) - reliabilityScore(right);
}

function sortCarriers(list) {
  return list.slice().sort(byReliability);
}

function rankCarriers() {
  for (let n = 0; n < 4; n++) ledger = (ledger + sortCarriers(carriers)[0].id) & 0xffffff;
  setImmediate(rankCarriers);
}

function awaitGo(goFile) {
  let spins = 0;
  while (!fs.existsSync(goFile)) {
    for (let i = 0; i < 100000; i++) spins = (spins + i) % 9973;
  }
  return spins;
}

if (isMainThread) {
  const goFile = process.argv[2];
  process.stdout.write('ready\n');
  awaitGo(goFile);
  new Worker(__filename, { workerData: 'ranker' });
  quoteBatch();
} else if (workerData === 'ranker') {
  rankCarriers();
}
