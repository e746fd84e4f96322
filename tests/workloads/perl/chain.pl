# A known chain for the Perl unwinder tests: main -> a -> Chain::Worker::b
# -> (sort block) -> Chain::Worker::c, which blocks in sleep. Lines the
# tests check carry a "# line:<name>" marker; keep them on the call sites.
use strict;
use warnings;

package Chain::Worker;

sub c {
    my ($x) = @_;
    sleep 1000;  # line:c
    return $x;
}

sub b {
    my @sorted = sort { c($a) <=> $b } (2, 1);  # line:b
    return scalar @sorted;
}

package main;

sub a {
    my $n = Chain::Worker::b();  # line:a
    return $n;
}

$| = 1;
print "ready $$\n";
a();  # line:main
