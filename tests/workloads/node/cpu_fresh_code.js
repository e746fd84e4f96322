// JIT code in pages V8 commits while the chain runs (tests/v8.rs): after
// awaitGo() (until <go-file> exists), round after round, compiles filler
// functions (run with --always-sparkplug: each call compiles its baseline
// code), then a fresh copy of a, b and c (a new source each round, named
// as this script: no code is shared with the round before), and runs
// main() -> a() -> b() -> c() for a round's time, c() spinning. The code
// space grows into new pages all the time (the old rounds' code is
// garbage, its pages given back), so the chain's code is most often in
// pages that were not executable a moment before. Prints "ready" once it
// starts.
'use strict';

const fs = require('fs');
const vm = require('vm');

const ROUND_MS = 40;
const FILLERS = 8;
const FILLER_STATEMENTS = 300;

function awaitGo(goFile) {
  let spins = 0;
  while (!fs.existsSync(goFile)) {
    for (let i = 0; i < 100000; i++) spins = (spins + i) % 9973;
  }
  return spins;
}

// A function of many statements: tens of KiB of baseline code.
function fillerSource(round, k) {
  let body = `let s = ${round * FILLERS + k};\n`;
  for (let i = 0; i < FILLER_STATEMENTS; i++) body += `s = (s * 31 + ${i}) % 1000003;\n`;
  return `(function filler() {\n${body}return s;\n})`;
}

// The chain's callees; the comment makes each round's source new.
function chainSource(round) {
  return `// round ${round}
(function () {
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
  return a;
})()`;
}

function main(a) {
  let sum = 0;
  const end = Date.now() + ROUND_MS;
  while (Date.now() < end) sum += a(20000);
  return sum;
}

process.stdout.write('ready\n');
awaitGo(process.argv[2]);
let total = 0;
for (let round = 0; ; round++) {
  // Indirect eval: its compile has no JavaScript frame of its own (vm's
  // Script constructor's is unnamed on Node 20).
  for (let k = 0; k < FILLERS; k++) total += (0, eval)(fillerSource(round, k))();
  total += main(vm.runInThisContext(chainSource(round), { filename: __filename }));
}
