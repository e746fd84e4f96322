<?php
// tests/php.rs lines_past_5000_keep_their_numbers: the test puts 5000
// comment lines at the padding line, so that the functions below lie past
// line 5000 (more than a frame word's 12 bits of line):
// {main} -> Far\Deep::run -> Far\spin. Lines the test expects end in
// "// line:<name>".

namespace Far;

$deep = new Deep();
while (true) {
    $deep->run(); // line:main
}

// line:padding

function spin(): int
{
    $s = 0;
    for ($i = 0; $i < 100000; $i++) { // line:spin_first
        $s += $i & 7;
    } // line:spin_last
    return $s;
}

class Deep
{
    public function run(): int
    {
        return spin() + 1; // line:run
    }
}
