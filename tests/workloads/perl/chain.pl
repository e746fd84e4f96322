# A known chain for the Perl unwinder tests. Lines the tests check carry a
# "# line:<name>" marker; keep them on the call sites.
#   perl chain.pl block: main -> a -> Chain::Worker::b -> sort { } block
#                        -> Chain::Worker::c, asleep
#   perl chain.pl named: main -> a -> eval { } -> Chain::Worker::b_named
#                        -> sort by_c -> Chain::Worker::by_c -> map { }
#                        -> Chain::Worker::c, asleep
#   perl chain.pl string: main -> a -> eval '' -> Chain::Worker::b -> ...
#   perl chain.pl thread: the main thread joins an ithread running
#                         main::thread_main -> a -> (as "block")
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

sub by_c {
    my @keys = map { c($_) } ($a, $b);  # line:by_c
    return $keys[0] <=> $keys[1];
}

sub b_named {
    my @sorted = sort by_c (2, 1);  # line:b_named
    return scalar @sorted;
}

package main;

sub a {
    my ($mode) = @_;
    if ($mode eq 'named') {
        my $n = eval {
            Chain::Worker::b_named();  # line:a_named
        };
        return $n;
    }
    if ($mode eq 'string') {
        return eval "Chain::Worker::b()" // die $@;  # line:a_string
    }
    my $n = Chain::Worker::b();  # line:a
    return $n;
}

sub thread_main {
    print "ready $$\n";
    return a('block');  # line:thread_main
}

$| = 1;
my $mode = shift // 'block';
die "usage: chain.pl block|named|string|thread\n" unless $mode =~ /\A(?:block|named|string|thread)\z/;
if ($mode eq 'thread') {
    require threads;
    threads->create(\&thread_main)->join();  # line:create
    exit 0;
}
print "ready $$\n";
a($mode);  # line:main
