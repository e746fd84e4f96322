// A chain in a worker_threads worker (crates/interpreters/tests/v8_live.rs):
// the worker runs its top level -> wa() -> wb() -> wc(), blocked in
// Atomics.wait; the main thread, once the worker says so, prints "ready"
// and blocks in mainWait(). Each thread has its own isolate and stack.
'use strict';

const { Worker, isMainThread, parentPort } = require('worker_threads');

const cell = new Int32Array(new SharedArrayBuffer(4));

function wc() {
  parentPort.postMessage('blocking');
  return Atomics.wait(cell, 0, 0, 600000); // line:wc
}

function wb() {
  return wc(); // line:wb
}

function wa() {
  return wb(); // line:wa
}

function mainWait() {
  return Atomics.wait(cell, 0, 0, 600000); // line:mainWait
}

if (isMainThread) {
  const worker = new Worker(__filename);
  worker.on('message', () => {
    process.stdout.write('ready\n');
    // Let the worker reach its wait, then block the main thread too.
    setTimeout(mainWait, 200);
  });
} else {
  wa(); // line:workerTop
}
