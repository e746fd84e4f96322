// A CPU-bound chain in a worker thread for the BPF V8 unwinder
// (tests/v8.rs): the worker runs workerMain() -> wa() -> wb() -> wc() each
// event loop turn of its own (its own isolate, its own stack), wc()
// spinning; the main thread waits in its event loop. Prints "ready" once
// the worker is started.
'use strict';

const { Worker, isMainThread } = require('worker_threads');
let sum = 0;

function wc(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003;
  return x;
}

function wb(n) {
  return wc(n) + 1;
}

function wa(n) {
  return wb(n) + 1;
}

function workerMain() {
  for (let i = 0; i < 200; i++) sum += wa(200);
  setImmediate(workerMain);
}

if (isMainThread) {
  new Worker(__filename);
  process.stdout.write('ready\n');
} else {
  workerMain();
}
