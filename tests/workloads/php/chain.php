<?php
// The PHP workload of crates/interpreters/tests/php_live.rs: the main
// thread runs {main} -> a -> Chain\Worker::b -> usort (C) ->
// Chain\Worker::compare -> c -> fread (C) and blocks reading stdin, which
// the test never writes. It first says how much JIT code opcache emitted
// (the test runs it with and without the JIT). Lines marked `line:<name>` are asserted.

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

// How many bytes of JIT code opcache has emitted (0 without the JIT).
$status = function_exists('opcache_get_status') ? opcache_get_status(false) : false;
$jit = is_array($status) && isset($status['jit']) && $status['jit']['on'] ? $status['jit'] : null;
$jitted = $jit === null ? 0 : $jit['buffer_size'] - $jit['buffer_free'];
fwrite(STDOUT, "ready " . getmypid() . " jit " . $jitted . "\n");
fflush(STDOUT);
a(); // line:main
