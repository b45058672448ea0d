"""Hosts as network namespaces: created, joined, cut off, shaped, and removed on every way out."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.network import Network, enter, leftovers, network, routes_for
from harness.network.hosts import close_all
from tests.harness.network.support import assert_nothing_left, require_root, require_toxiproxy, snapshot


def _in_namespace(ns: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=30)


def test_hosts_are_created_joined_and_removed() -> None:
    require_root()
    with network(["a", "b"]) as net:
        assert net is not None
        prefix = net.prefix
        names = leftovers(net.prefix)
        assert {f"{net.prefix}-a", f"{net.prefix}-b", net.bridge} <= set(names)
        # b reaches a's address over the bridge (a TCP connect, no ping binary needed)
        code = ("import socket,sys; s=socket.socket(); s.settimeout(2); "
                f"r=s.connect_ex(('{net.address('a')}', 9)); sys.exit(0 if r in (0, 111) else r)")
        assert _in_namespace(str(net.namespace("b")), sys.executable, "-c", code).returncode == 0
    assert leftovers(prefix) == []


def test_a_failing_block_removes_the_hosts() -> None:
    require_root()
    before = snapshot()
    with pytest.raises(RuntimeError), network(["a"]):
        raise RuntimeError("a run that fails")
    assert_nothing_left(before)


def test_close_all_is_the_fallback() -> None:
    require_root()
    net = Network(["a"])
    assert leftovers(net.prefix)
    close_all()
    assert leftovers(net.prefix) == []


def test_partition_cuts_a_host_off_and_heals() -> None:
    require_root()
    with network(["a", "b"]) as net:
        assert net is not None
        code = ("import socket,sys; s=socket.socket(); s.settimeout(1); "
                f"r=s.connect_ex(('{net.address('a')}', 9)); sys.exit(0 if r in (0, 111) else 1)")
        net.set_link("b", up=False)
        assert _in_namespace(str(net.namespace("b")), sys.executable, "-c", code).returncode == 1
        net.set_link("b", up=True)
        assert _in_namespace(str(net.namespace("b")), sys.executable, "-c", code).returncode == 0


def test_bandwidth_is_a_tbf_on_both_ends_and_removed() -> None:
    require_root()
    with network(["a"]) as net:
        assert net is not None
        net.shape("a", "10mbit")
        outer = subprocess.run(["tc", "qdisc", "show", "dev", f"{net.prefix}v0"], capture_output=True, text=True)
        inner = _in_namespace(str(net.namespace("a")), "tc", "qdisc", "show", "dev", f"{net.prefix}h0")
        assert "tbf" in outer.stdout and "10Mbit" in outer.stdout
        assert "tbf" in inner.stdout
        net.shape("a", None)
        outer = subprocess.run(["tc", "qdisc", "show", "dev", f"{net.prefix}v0"], capture_output=True, text=True)
        assert "tbf" not in outer.stdout


def _echo_server(port_box: list[int], ready: threading.Event, stop: threading.Event) -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        srv.settimeout(0.2)
        port_box.append(srv.getsockname()[1])
        ready.set()
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)


def test_a_client_host_reaches_the_root_through_the_proxy_and_the_delay_shows() -> None:
    require_toxiproxy()
    before = snapshot()
    port_box: list[int] = []
    ready, stop = threading.Event(), threading.Event()
    server = threading.Thread(target=_echo_server, args=(port_box, ready, stop), daemon=True)
    server.start()
    ready.wait(5)
    try:
        with network(["c"]) as net:
            assert net is not None
            routes = routes_for(net, None)
            url = routes.rewrite(f"tcp://127.0.0.1:{port_box[0]}", "c", {port_box[0]})
            host, port = url.removeprefix("tcp://").split(":")
            assert host == net.address(None)
            probe = (f"import socket,sys,time; s=socket.create_connection(('{host}', {port}), 5); "
                     "t=time.monotonic(); s.sendall(b'x'); s.recv(1); print(time.monotonic()-t)")
            quick = float(_in_namespace(str(net.namespace("c")), sys.executable, "-c", probe).stdout)
            proxy = net.toxiproxy(None)
            logs = net.log_dir
            (name,) = routes.proxies_of("c", {port_box[0]})
            proxy.add_toxic(name, "d", "latency", {"latency": 50, "jitter": 0}, "downstream")
            slow = float(_in_namespace(str(net.namespace("c")), sys.executable, "-c", probe).stdout)
            # a round trip crosses the delayed stream once: at least the injected 50 ms more
            assert slow >= 0.050 > quick
    finally:
        stop.set()
        server.join(5)
    assert_nothing_left(before)
    assert not logs.exists(), f"the proxies' log folder {logs} outlived its hosts"


def test_enter_moves_a_process_into_a_host() -> None:
    require_root()
    with network(["a"]) as net:
        assert net is not None
        code = (f"import socket; from harness.network import enter; enter({net.namespace('a')!r}); "
                f"s=socket.socket(); s.bind(({net.address('a')!r}, 0)); print('bound')")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                              cwd=str(Path(__file__).parents[3]))
        assert done.stdout.strip() == "bound", done.stderr
    assert callable(enter)
