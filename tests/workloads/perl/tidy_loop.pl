# Formats a file again and again with Perl::Tidy (Debian's perltidy),
# compiling its modules anew each time: their `use` lines run as BEGIN
# blocks, which Perl frees once run.
use strict;
use warnings;
my ($input, $seconds) = @ARGV;
my $end = time + $seconds;
while (time < $end) {
    delete $INC{$_} for grep { m{^Perl/Tidy} } keys %INC;
    {
        no warnings;
        local $SIG{__WARN__} = sub { };
        require Perl::Tidy;
    }
    my ($out, $err) = ('', '');
    Perl::Tidy::perltidy(source => $input, destination => \$out, stderr => \$err, argv => '-se', perltidyrc => '/dev/null');
    die "no output" unless length $out;
}
