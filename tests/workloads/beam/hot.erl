%% The module tests/beam.rs reloads while the agent runs: run/0 ->
%% outer/1 -> spin/2, run/0 calling itself by its module's name so that
%% the process goes on in the newest version. The test loads a second
%% version with its body changed and its lines moved.
-module(hot).
-export([run/0]).

run() ->
    _ = outer(2000),
    hot:run().

outer(N) -> spin(N, 0) + 1.

spin(0, Acc) -> Acc;
spin(N, Acc) -> spin(N - 1, (Acc * 7 + N) band 16#ffff).
