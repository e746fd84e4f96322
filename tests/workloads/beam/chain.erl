%% A known chain for the BEAM tests (tests/beam.rs): one process runs
%% a/1 -> b/1 -> c/1 -> leaf_spin/2 forever, a second sorts a list with
%% lists:sort/2 and a comparator (compare/2) that calls cmp_spin/2. No
%% call in the chains is a tail call, so each caller keeps its frame.
-module(chain).
-export([main/0, compare/2]).

main() ->
    spawn(fun sorter/0),
    chain_loop().

chain_loop() ->
    _ = a(2000),
    chain_loop().

a(N) -> b(N) + 1.
b(N) -> c(N) + 1.
c(N) -> leaf_spin(N, 0) + 1.

%% The chain's leaf: arithmetic only, no allocation, no BIF.
leaf_spin(0, Acc) -> Acc;
leaf_spin(N, Acc) -> leaf_spin(N - 1, (Acc * 7 + N) band 16#ffff).

sorter() ->
    L = [(I * 7919) rem 1000 || I <- lists:seq(1, 200)],
    _ = lists:sort(fun compare/2, L),
    sorter().

compare(X, Y) -> cmp_spin(200, X) =< cmp_spin(200, Y).

cmp_spin(0, Acc) -> Acc;
cmp_spin(N, Acc) -> cmp_spin(N - 1, (Acc * 3 + N) band 16#ffff).
