%% C called from Erlang, for the BEAM tests (tests/beam.rs): one process
%% compares two long lists forever (loop/2 -> outer/2 -> inner/2, whose
%% `<` runs the emulator's C term comparison, erts_cmp_compound, from a
%% shared fragment of the JIT). Nothing is allocated in the loop: no
%% garbage collection, no BIF.
-module(cpath).
-export([main/0]).

main() ->
    L = lists:seq(1, 20000),
    M = lists:seq(1, 20000) ++ [0],
    loop(L, M).

loop(L, M) ->
    _ = outer(L, M),
    loop(L, M).

outer(L, M) -> inner(L, M) + 1.

inner(L, M) ->
    case L < M of
        true -> 1;
        false -> 0
    end.
