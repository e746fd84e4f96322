// A known chain for the V8 user-space walk (crates/interpreters/tests/v8_live.rs):
// the main thread runs top level -> a() -> b() -> c(), and c() blocks in
// Atomics.wait. With argument "hot" the chain is first run many times with
// a non-blocking wait, so that the optimising tiers compile a, b and c.
// Prints "ready" once it is about to block for good. Lines marked
// `// line:<name>` are the ones the test asserts.
'use strict';

const cell = new Int32Array(new SharedArrayBuffer(4));
let spins = 0;

function c(timeoutMs) {
  spins += 1;
  return Atomics.wait(cell, 0, 0, timeoutMs); // line:c
}

function b(timeoutMs) {
  return c(timeoutMs) === 'ok' ? 1 : 0; // line:b
}

function a(timeoutMs) {
  return b(timeoutMs) + 1; // line:a
}

if (process.argv[2] === 'hot') {
  for (let i = 0; i < 200000; i++) a(0);
}
process.stdout.write('ready\n');
a(600000); // line:top
