<?php
// The PHP workload of crates/interpreters/tests/php_live.rs: the main
// thread runs {main} -> a -> Chain\Worker::b -> usort (C) ->
// Chain\Worker::compare -> c -> fread (C) and blocks reading stdin, which
// the test never writes. Lines marked `line:<name>` are asserted.

namespace Chain;

class Worker
{
    public function b(array $items): array
    {
        usort($items, [$this, 'compare']); // line:b
        return $items;
    }

    public function compare(int $x, int $y): int
    {
        return c($x, $y); // line:compare
    }
}

function c(int $x, int $y): int
{
    $got = fread(STDIN, 1); // line:c
    return $got === false ? 0 : $x <=> $y;
}

function a(): array
{
    return (new Worker())->b([2, 1]); // line:a
}

fwrite(STDOUT, "ready " . getmypid() . "\n");
fflush(STDOUT);
a(); // line:main
