<?php
// Runs a PHP program (argv[1], with the arguments after it) under
// Excimer, PHP's sampling profiler, for bench/accuracy.py: CPU time at
// 99 Hz from here to the program's end, its collapsed stacks written to
// $EXCIMER_OUTPUT at shutdown (the program may call exit()).
$profiler = new ExcimerProfiler();
$profiler->setPeriod(1 / 99);
$profiler->setEventType(EXCIMER_CPU);
$profiler->start();
register_shutdown_function(function () use ($profiler) {
    $profiler->stop();
    file_put_contents(getenv('EXCIMER_OUTPUT'), $profiler->getLog()->formatCollapsed());
});
$program = $argv[1];
$argv = array_slice($argv, 1);
$_SERVER['argv'] = $argv;
$_SERVER['argc'] = count($argv);
require $program;
