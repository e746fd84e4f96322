// A CPU-bound chain for the BPF V8 unwinder (tests/v8.rs): the main
// thread runs main() -> a() -> b() -> c(), and c() spins without
// syscalls, so samples land in c's code (the interpreter's bytecode
// handlers with --jitless, JIT code otherwise). By default main() runs
// from the top level and never returns; with argument "immediate" it runs
// a short while per event loop turn (setImmediate: called from C++ by
// processImmediate), so that no function loops long in one call and
// TurboFan optimises main with a, b and c inlined (on-stack replacement,
// whose code the JSFunction does not hold, is not named). Prints "ready"
// once it starts.
'use strict';

const immediate = process.argv[2] === 'immediate';
let sum = 0;

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
  for (let i = 0; immediate ? i < 200 : true; i++) {
    sum += a(immediate ? 200 : 20000);
  }
  setImmediate(main);
}

process.stdout.write('ready\n');
main();
