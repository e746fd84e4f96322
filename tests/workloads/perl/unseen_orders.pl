# tests/perl.rs unseen_script_*: the closing measurement's script, written
# apart from the other workloads. Two chains, taken in turn:
#   main -> Orders::Batch::submit -> Orders::Batch::validate ->
#     Orders::checksum (called as a method, a plain sub, a sub of another
#     package)
#   main -> Orders::Batch::arrange -> (sort with a block, C) ->
#     Orders::Batch::heavier -> Orders::weight
# Lines the test expects end in "# line:<name>".
use strict;
use warnings;

package Orders;

sub checksum {
    my ($count) = @_;
    my $sum = 0;
    for my $n (1 .. 60_000) { # line:checksum_first
        $sum += ($n * $count) & 15;
    } # line:checksum_last
    return $sum;
}

sub weight {
    my ($item) = @_;
    my $w = 0;
    for my $k (1 .. 1_500) { # line:weight_first
        $w += ($k ^ length $item) & 3;
    } # line:weight_last
    return $w + ord $item;
}

package Orders::Batch;

sub new {
    my ($class, @items) = @_;
    return bless { items => [@items] }, $class;
}

sub submit {
    my ($self, $count) = @_;
    return $self->validate($count + 1); # line:submit
}

sub validate {
    my ($self, $count) = @_;
    return Orders::checksum($count) * 2; # line:validate
}

sub heavier {
    my ($x, $y) = @_;
    return Orders::weight($x) <=> Orders::weight($y); # line:heavier
}

sub arrange {
    my ($self) = @_;
    my @sorted = sort { heavier($a, $b) } @{ $self->{items} }; # line:arrange
    return scalar @sorted;
}

package main;

my $batch = Orders::Batch->new(qw(pear fig kiwi apple plum lime date quince));
while (1) {
    $batch->submit(3); # line:main_submit
    $batch->arrange; # line:main_arrange
}
