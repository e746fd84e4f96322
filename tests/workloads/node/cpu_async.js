// An async function resumed from a promise, CPU-bound, for the BPF V8
// unwinder (tests/v8.rs): pump() loops on `await tick()` (tick is async
// and returns at once, so the await is of a settled promise) and then
// runs crunch() -> mix() -> leaf(), leaf spinning. After each await,
// pump's continuation runs from the microtask queue (V8's RunMicrotasks),
// not from its caller; every 50 turns it also awaits setImmediate, so
// the event loop runs and the continuation comes from Node's
// processTicksAndRejections or its microtask checkpoint. Prints "ready"
// once it starts.
'use strict';

let sum = 0;

function leaf(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003;
  return x;
}

function mix(n) {
  return leaf(n) + 1;
}

function crunch(n) {
  return mix(n) + 1;
}

async function tick() {
  return sum & 1;
}

function later() {
  return new Promise((resolve) => setImmediate(resolve));
}

async function pump() {
  for (let turn = 0; ; turn++) {
    sum += await tick();
    sum += crunch(2000);
    if (turn % 50 === 0) await later();
  }
}

// Garbage first: a few scavenges promote the functions above to the old
// generation, where they no longer move between a sample and its naming
// (a moved function's frame is unknown: docs/v8.md).
let junk = null;
for (let i = 0; i < 500000; i++) junk = [i, i + 1];

process.stdout.write('ready\n');
pump();
