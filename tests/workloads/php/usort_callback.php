<?php
// tests/php.rs: usort (a C function) calls back into PHP: {main} ->
// Chain\a -> usort -> Chain\Worker::compare -> Chain\c, c spinning in VM
// instructions. Lines the test expects end in "// line:<name>".

namespace Chain;

function c(int $x, int $y): int
{
    $sum = 0;
    for ($i = 0; $i < 2000; $i++) { // line:c_first
        $sum += $i & 7;
    } // line:c_last
    return $x <=> $y;
}

class Worker
{
    public function compare(int $x, int $y): int
    {
        return c($x, $y); // line:compare
    }
}

function a(Worker $w): array
{
    $items = [5, 3, 1, 4, 2, 9, 8, 7, 6, 0];
    usort($items, [$w, 'compare']); // line:a
    return $items;
}

$w = new Worker();
while (true) {
    a($w); // line:main
}
