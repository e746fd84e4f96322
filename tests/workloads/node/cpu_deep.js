// A deep CPU-bound chain for the BPF V8 unwinder (tests/v8.rs): top level
// -> main() -> rec() 100 times -> leaf(), leaf() spinning, so that one
// sample has more JavaScript frames than one run of the unwinder takes.
// Prints "ready" once it starts.
'use strict';

let sum = 0;

function leaf() {
  let x = 0;
  for (let i = 0; i < 20000; i++) x = (x * 31 + i) % 1000003;
  return x;
}

function rec(n) {
  return n === 0 ? leaf() : rec(n - 1) + 1;
}

function main() {
  for (;;) sum += rec(99);
}

process.stdout.write('ready\n');
main();
