// A CPU-bound chain for the BPF V8 unwinder (tests/v8.rs): the main
// thread runs top level -> main() -> a() -> b() -> c(), and c() spins
// without syscalls, so samples land in c's code (the interpreter's
// bytecode handlers with --jitless, JIT code otherwise). Prints "ready"
// once it starts.
'use strict';

function c(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003;
  return x;
}

function b(n) {
  return c(n) + 1;
}

function a(n) {
  return b(n) + 1;
}

function main() {
  let sum = 0;
  for (;;) {
    sum += a(20000);
    if (sum < 0) return sum;
  }
}

process.stdout.write('ready\n');
main();
