# tests/perl.rs lines_past_5000_keep_their_numbers: the test puts 5000
# comment lines at the padding line, so that the subs below lie past line
# 5000 (more than a frame word's 12 bits of line):
# main -> Far::Deep::run -> Far::spin. Lines the test expects end in
# "# line:<name>".
use strict;
use warnings;

while (1) {
    Far::Deep::run(); # line:main
}

# line:padding

package Far;

sub spin {
    my $s = 0;
    for my $i (1 .. 100_000) { # line:spin_first
        $s += $i & 7;
    } # line:spin_last
    return $s;
}

package Far::Deep;

sub run {
    my $total = 0;
    $total += Far::spin(); # line:run
    return $total;
}
