# A known chain in Elixir for the BEAM tests (tests/beam.rs): the script's
# process runs Ex.Chain.loop/0 -> a/1 -> b/1 -> c/1 -> leaf_spin/2
# forever. No call in the chain is a tail call, so each caller keeps its
# frame.
defmodule Ex.Chain do
  def loop do
    _ = a(2000)
    loop()
  end

  def a(n), do: b(n) + 1
  def b(n), do: c(n) + 1
  def c(n), do: leaf_spin(n, 0) + 1

  # The chain's leaf: arithmetic only, no allocation, no BIF.
  def leaf_spin(0, acc), do: acc
  def leaf_spin(n, acc), do: leaf_spin(n - 1, Bitwise.band(acc * 7 + n, 0xFFFF))
end

Ex.Chain.loop()
