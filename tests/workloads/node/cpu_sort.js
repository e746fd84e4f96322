// A comparator under the Array.prototype.sort builtin, CPU-bound, for the
// BPF V8 unwinder (tests/v8.rs): each event loop turn (setImmediate) runs
// main() -> sortAll() -> Array.prototype.sort -> byValue(), and byValue
// spins a little per comparison. Prints "ready" once it starts.
'use strict';

const values = [];
for (let i = 0; i < 64; i++) values.push((i * 7919) % 64);
let spins = 0;

function byValue(x, y) {
  for (let k = 0; k < 2000; k++) spins = (spins + k) % 1000003;
  return x - y;
}

function sortAll() {
  return values.slice().sort(byValue)[0];
}

function main() {
  for (let i = 0; i < 4; i++) sortAll();
  setImmediate(main);
}

// Garbage first: a few scavenges promote the functions above to the old
// generation, where they no longer move between a sample and its naming
// (a moved function's frame is unknown: docs/v8.md).
let junk = null;
for (let i = 0; i < 500000; i++) junk = [i, i + 1];

process.stdout.write('ready\n');
main();
