<?php
// tests/php.rs unseen_script_*: the closing measurement's script, written
// apart from the other workloads. Two chains, taken in turn:
//   {main} -> Billing\Ledger::close -> Billing\Ledger::sumLines ->
//     Billing\roundCents (a namespaced function)
//   {main} -> Billing\Ledger::convert -> array_map -> (C) ->
//     Billing\Ledger::toEuro (a method as callback) -> Billing\Rates::lookup
// Lines the test expects end in "// line:<name>".

namespace Billing;

function roundCents(int $lines): int
{
    $cents = 0;
    for ($n = 0; $n < 20000; $n++) { // line:round_first
        $cents += ($n * $lines) & 15;
    } // line:round_last
    return $cents;
}

final class Rates
{
    public static function lookup(int $amount): int
    {
        $rate = 0;
        for ($k = 0; $k < 3000; $k++) { // line:lookup_first
            $rate += ($k ^ $amount) & 3;
        } // line:lookup_last
        return $rate + $amount;
    }
}

class Ledger
{
    private array $amounts = [12, 7, 31, 4, 18, 25, 9, 2];

    public function close(int $lines): int
    {
        return $this->sumLines($lines + 1); // line:close
    }

    private function sumLines(int $lines): int
    {
        return roundCents($lines) * 2; // line:sumLines
    }

    public function toEuro(int $amount): int
    {
        return Rates::lookup($amount); // line:toEuro
    }

    public function convert(): array
    {
        return array_map([$this, 'toEuro'], $this->amounts); // line:convert
    }
}

$ledger = new Ledger();
while (true) {
    $ledger->close(3); // line:main_close
    $ledger->convert(); // line:main_convert
}
