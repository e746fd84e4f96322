# tests/perl.rs: sort (C) calls a Perl sub back: main -> Chain::a ->
# (sort, a nested op loop) -> Chain::by_value -> Chain::c, c spinning in
# ops. Lines the test expects end in "# line:<name>".
use strict;
use warnings;

package Chain;

sub c {
    my ($x, $y) = @_;
    my $sum = 0;
    for my $i (1 .. 2000) { # line:c_first
        $sum += $i & 7;
    } # line:c_last
    return $x <=> $y;
}

sub by_value {
    return c($a, $b); # line:by_value
}

sub a {
    my @items = (5, 3, 1, 4, 2, 9, 8, 7, 6, 0);
    my @sorted = sort by_value @items; # line:a
    return scalar @sorted;
}

package main;

while (1) {
    Chain::a(); # line:main
}
