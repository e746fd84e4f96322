// A CPU-bound chain (crates/interpreters/tests/v8_live.rs): the main
// thread spins in top level -> outer() -> inner() without syscalls, so a
// walk must start from the thread's registers (pc, fp) in JIT code or in
// the interpreter. Prints "ready" once inner() has run a while.
'use strict';

function inner(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003; // line:loop
  return x; // line:return
}

function outer() {
  let sum = 0;
  for (;;) { // line:outerLoop
    sum += inner(100000); // line:outer
    if (sum < 0) return sum;
  }
}

process.stdout.write('ready\n');
outer(); // line:spinTop
