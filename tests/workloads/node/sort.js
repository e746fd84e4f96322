// A JavaScript comparator called from the Array.prototype.sort builtin
// (crates/interpreters/tests/v8_live.rs): top level -> sortAll() ->
// Array.prototype.sort -> byValue(), which blocks in Atomics.wait on the
// first comparison. Prints "ready" before sorting.
'use strict';

const cell = new Int32Array(new SharedArrayBuffer(4));

function byValue(x, y) {
  Atomics.wait(cell, 0, 0, 600000); // line:byValue
  return x - y;
}

function sortAll(values) {
  return values.sort(byValue); // line:sortAll
}

process.stdout.write('ready\n');
sortAll([3, 1, 2]); // line:top
