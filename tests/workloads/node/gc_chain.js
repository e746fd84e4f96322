// A chain that runs V8's garbage collector (tests/v8.rs, run with
// --expose-gc): main() -> a() -> b() -> c(), and c() calls gc(), a full
// collection of a heap kept large by `live`. V8 marks it under
// PushAllRegistersAndIterateStack, hand-written code without CFI between
// the collector's C++ and the JavaScript that called it: a sample there
// reaches the root only through that function's frame pointer. Prints
// "ready" once it starts.
'use strict';

const live = [];
for (let i = 0; i < 300000; i++) live.push({ i, next: live[i - 1], text: `item ${i}` });

function c() {
  gc();
  return live.length;
}

function b() {
  return c() + 1;
}

function a() {
  return b() + 1;
}

function main() {
  let sum = 0;
  for (;;) sum += a();
}

process.stdout.write('ready\n');
main();
