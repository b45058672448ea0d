%% mqbench_epmd: how the nodes of one private RabbitMQ cluster find each other's distribution port.
%%
%% Loaded with `-epmd_module mqbench_epmd`. Every node keeps its own epmd (on its own port, so that it is
%% the node's to stop and a node fault takes it with the node), and the nodes of a cluster may share one
%% address. Stock Erlang asks the epmd on the peer's host at the one port ERL_EPMD_PORT names, which would be
%% the asking node's own epmd. So the cluster's nodes are looked up in a static table instead:
%% MQBENCH_DIST_PORTS = "name=port name=port ..." (the part of each node name before the @), and every
%% other name (the CLI tools, the prelaunch check for a duplicate node) goes to erl_epmd as usual.
%% A node registers with its own epmd as usual. Distribution protocol version 6 (OTP 23 and later).
-module(mqbench_epmd).

-export([start_link/0, register_node/2, register_node/3, port_please/2, port_please/3,
         listen_port_please/2, address_please/3, names/0, names/1]).

start_link() -> erl_epmd:start_link().

register_node(Name, Port) -> erl_epmd:register_node(Name, Port).

register_node(Name, Port, Family) -> erl_epmd:register_node(Name, Port, Family).

listen_port_please(Name, Host) -> erl_epmd:listen_port_please(Name, Host).

names() -> erl_epmd:names().

names(Host) -> erl_epmd:names(Host).

port_please(Name, Ip) -> port_please(Name, Ip, infinity).

port_please(Name, Ip, Timeout) ->
    case cluster_port(Name) of
        {ok, Port} -> {port, Port, 6};
        error -> erl_epmd:port_please(Name, Ip, Timeout)
    end.

address_please(Name, Host, Family) ->
    case {erl_epmd:address_please(Name, Host, Family), cluster_port(Name)} of
        {{ok, Ip}, {ok, Port}} -> {ok, Ip, Port, 6};
        {Resolved, _} -> Resolved
    end.

cluster_port(Name) ->
    Wanted = if is_atom(Name) -> atom_to_list(Name); true -> Name end,
    Table = [string:split(Entry, "=") || Entry <- string:lexemes(os:getenv("MQBENCH_DIST_PORTS", ""), " ")],
    case [Port || [Node, Port] <- Table, Node =:= Wanted] of
        [Port | _] -> {ok, list_to_integer(Port)};
        [] -> error
    end.
