// An off-CPU chain for the BPF V8 unwinder (tests/v8.rs): the main thread
// runs top level -> main() -> a() -> b() -> c() over and over, and c()
// blocks 2 ms in Atomics.wait (a futex) each time, so that its switch-outs
// are sampled with JavaScript above the C++ builtin. Prints "ready" once
// it starts.
'use strict';

const cell = new Int32Array(new SharedArrayBuffer(4));
let timeouts = 0;

function c() {
  if (Atomics.wait(cell, 0, 0, 2) === 'timed-out') timeouts += 1;
}

function b() {
  c();
}

function a() {
  b();
}

function main() {
  for (;;) a();
}

process.stdout.write('ready\n');
main();
