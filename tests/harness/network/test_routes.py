"""Routes rewrite exactly the server's loopback addresses, in URLs and in a driver's plan."""

from __future__ import annotations

from typing import Any

from harness.network import Routes, loopback_ports


class FakeProxy:
    def __init__(self) -> None:
        self.made: list[tuple[str, int]] = []
        self.mirrors: list[tuple[str, str, str]] = []  # (name, listen, upstream)

    def proxy(self, name: str, upstream: int, listen: str | None = None, upstream_host: str = "127.0.0.1") -> int:
        if listen is not None:
            self.mirrors.append((name, listen, f"{upstream_host}:{upstream}"))
            return int(listen.rpartition(":")[2])
        self.made.append((name, upstream))
        return 40000 + len(self.made)


class FakeNetwork:
    def __init__(self) -> None:
        self.tox = FakeProxy()

    def address(self, host: str | None) -> str:
        return "10.9.9.2" if host == "server" else "10.9.9.1"

    def toxiproxy(self, host: str | None) -> FakeProxy:
        return self.tox


def test_only_the_servers_ports_are_rewritten_one_proxy_per_client_host() -> None:
    net: Any = FakeNetwork()
    routes = Routes(net, "server")
    plan = {"endpoints": ["tcp://127.0.0.1:5000", "tcp://127.0.0.1:5001"], "other": "127.0.0.1:7", "n": 3}
    ports = loopback_ports(plan["endpoints"])
    assert ports == {5000, 5001}
    out = routes.rewrite(plan, "cons", ports)
    assert out == {"endpoints": ["tcp://10.9.9.2:40001", "tcp://10.9.9.2:40002"], "other": "127.0.0.1:7", "n": 3}
    assert routes.rewrite("redis://127.0.0.1:5000/0", "cons", ports) == "redis://10.9.9.2:40001/0"  # reused
    assert routes.rewrite("redis://127.0.0.1:5000/0", None, ports) == "redis://10.9.9.2:40003/0"  # root's own
    assert net.tox.made == [("cons-5000", 5000), ("cons-5001", 5001), ("root-5000", 5000)]
    assert routes.proxies_of("cons", {5000}) == ["cons-5000"]
    assert sorted(routes.proxies_of("server", {5000})) == ["cons-5000", "root-5000"]  # the server's own host


def test_a_placed_broker_command_runs_in_its_host_and_as_its_user() -> None:
    from harness.brokers import Placement
    from harness.brokers._spec import Command

    placement = Placement("server", ("ip", "netns", "exec", "mqnabcde-server"), lambda url: url)
    plain = placement.command(Command("redis-server", ("redis-server", "--port", "1")))
    assert plain.argv == ("ip", "netns", "exec", "mqnabcde-server", "redis-server", "--port", "1")
    as_user = placement.command(Command("rabbitmq-server", ("rabbitmq-server",), user="rabbitmq"))
    # entering a namespace needs root: the user is taken after entering
    assert as_user.argv[4:] == ("runuser", "-u", "rabbitmq", "--", "rabbitmq-server") and as_user.user is None


def test_a_client_host_given_the_urls_port_uses_its_own_listener_through_its_own_proxy() -> None:
    net: Any = FakeNetwork()
    routes = Routes(net, "server")
    assert routes.advertise("cons", 9092, 9101) == "10.9.9.2:40001"  # what cons's own listener advertises
    assert routes.advertise(None, 9092, 9100) == "10.9.9.2:40002"
    assert routes.rewrite("kafka://127.0.0.1:9092", "cons", {9092}) == "kafka://10.9.9.2:40001"
    assert routes.rewrite("kafka://127.0.0.1:9092", None, {9092}) == "kafka://10.9.9.2:40002"
    # a fault on cons acts on cons's listener's proxy, found from the URL's port
    assert routes.proxies_of("cons", {9092}) == ["cons-9101"]


def test_a_mirrored_port_leads_each_client_host_through_its_own_route() -> None:
    net: Any = FakeNetwork()
    routes = Routes(net, "server")
    routes.mirror("cons", 9876, 10911)
    routes.mirror("server", 9876, 10911)  # the broker's own host reaches it directly
    assert net.tox.made == [("cons-10911", 10911)]
    assert net.tox.mirrors == [("mirror-10911", "127.0.0.1:10911", "10.9.9.2:40001")]
    routes.rewrite("rocketmq://127.0.0.1:9876", "cons", {9876})
    assert sorted(routes.proxies_of("cons", {9876})) == ["cons-10911", "cons-9876"]
