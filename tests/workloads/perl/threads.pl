# tests/perl.rs: two ithreads, each spinning in its own chain
# (main -> Chain::worker_a -> Chain::a_leaf, and the same with b), the
# main thread blocked in join. Lines the test expects end in
# "# line:<name>".
use strict;
use warnings;
use threads;

package Chain;

sub a_leaf {
    my $sum = 0;
    for my $i (1 .. 2000) { # line:a_first
        $sum += $i & 7;
    } # line:a_last
    return $sum;
}

sub b_leaf {
    my $sum = 0;
    for my $i (1 .. 2000) { # line:b_first
        $sum += $i & 3;
    } # line:b_last
    return $sum;
}

sub worker_a {
    while (1) { a_leaf(); } # line:worker_a
}

sub worker_b {
    while (1) { b_leaf(); } # line:worker_b
}

package main;

my @threads = map { threads->create($_) } (\&Chain::worker_a, \&Chain::worker_b); # line:threads
$_->join for @threads;
