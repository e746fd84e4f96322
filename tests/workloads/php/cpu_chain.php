<?php
// tests/php.rs: {main} -> Chain\a -> Chain\Worker::b -> Chain\c, c
// spinning in VM instructions. Lines the test expects end in
// "// line:<name>".

namespace Chain;

function c(int $n): int
{
    $sum = 0;
    for ($i = 0; $i < $n; $i++) { // line:c_first
        $sum += $i & 7;
    } // line:c_last
    return $sum;
}

class Worker
{
    public function b(int $n): int
    {
        return c($n); // line:b
    }
}

function a(Worker $w): int
{
    return $w->b(2000); // line:a
}

$w = new Worker();
while (true) {
    a($w); // line:main
}
