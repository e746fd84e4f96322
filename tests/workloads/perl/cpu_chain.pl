# tests/perl.rs: main -> Chain::a -> Chain::Worker::b -> Chain::c, c
# spinning in ops. Lines the test expects end in "# line:<name>".
use strict;
use warnings;

package Chain;

sub c {
    my ($n) = @_;
    my $sum = 0;
    for my $i (1 .. $n) { # line:c_first
        $sum += $i & 7;
    } # line:c_last
    return $sum;
}

package Chain::Worker;

sub b {
    my ($n) = @_;
    return Chain::c($n); # line:b
}

package Chain;

sub a {
    return Chain::Worker::b(2000); # line:a
}

package main;

while (1) {
    Chain::a(); # line:main
}
