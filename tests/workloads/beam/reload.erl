%% Drives the hot code loading of tests/beam.rs: runs hot:run/0 in a
%% process; at a line on stdin compiles `New` (hot.erl changed), loads
%% it, waits until no process runs the old version and purges it, then
%% prints "reloaded".
-module(reload).
-export([main/1]).

main([New]) ->
    spawn(fun hot:run/0),
    io:format("running~n"),
    _ = io:get_line(""),
    {ok, hot, Binary} = compile:file(New, [binary, report]),
    {module, hot} = code:load_binary(hot, New, Binary),
    purge(),
    io:format("reloaded~n"),
    receive after infinity -> ok end.

%% The old version is purged once no process runs it.
purge() ->
    case code:soft_purge(hot) of
        true -> ok;
        false -> timer:sleep(10), purge()
    end.
