<?php
// tests/php.rs: {main} -> Chain\a -> Chain\Worker::b -> Chain\c, c
// spinning in VM instructions: for ever from the CLI, once per request
// under PHP-FPM. Lines the test expects end in "// line:<name>".

namespace Chain;

function c(int $n): int // line:c_start
{
    $sum = 0;
    for ($i = 0; $i < $n; $i++) { // line:c_first
        $sum += $i & 7;
    } // line:c_last
    return $sum;
} // line:c_end

class Worker
{
    public function b(int $n): int
    {
        return c($n); // line:b
    }
}

function a(Worker $w, int $n): int
{
    return $w->b($n); // line:a
}

$w = new Worker();
if (PHP_SAPI === 'fpm-fcgi') {
    // One request of a few milliseconds: long enough that the worker's
    // time between requests (FastCGI, request start and end) stays a
    // small part of its samples on a loaded machine.
    echo "chain ", a($w, 1000000), "\n"; // line:request
    return;
}
while (true) {
    a($w, 2000); // line:main
}
