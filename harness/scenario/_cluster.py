"""The broker's shape in a scenario (``cluster:``, per scenario and per variant) and the node faults: checked
here, in one place, with one-line errors naming the file and field.

    cluster: {nodes: 3, replicas: 3, min_insync: 2}   # scenario: every broker variant without its own
    variants:
      kafka: [{name: one-node, acks: all, cluster: {nodes: 1}}, {name: rf3, acks: all}]
    faults:
      - {at: 4s, action: kill-node, node: leader}

``replicas`` defaults to ``min(nodes, 3)``, ``min_insync`` to a majority of the replicas. A scenario-level
``cluster`` shapes the brokers that can run so; the others run as one node and their rows say why (the
provisioner's ``cluster_note``). A variant that asks for a shape its broker cannot take is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.drivers.base import SINGLE_NODE, ClusterShape
from harness.scenario._model import NODE_ROLES, Fault

if TYPE_CHECKING:
    from harness.scenario._model import Hosts
    from harness.scenario._parse import _Checker

CLUSTER_KEYS = ("nodes", "replicas", "min_insync")
NODE_FAULT_KEYS = ("node", "duration")
MAX_NODES = 7


def parse_cluster(c: _Checker, fld: str, raw: Any) -> ClusterShape:
    if not isinstance(raw, Mapping):
        raise c.fail(fld, f"must be a mapping like {{nodes: 3, replicas: 3, min_insync: 2}}, got {raw!r}")
    for key in raw:
        if key not in CLUSTER_KEYS:
            raise c.fail(f"{fld}.{key}", f"is not a cluster field; allowed: {', '.join(CLUSTER_KEYS)}")
    nodes = c.integer(f"{fld}.nodes", raw.get("nodes", 1), 1)
    if nodes > MAX_NODES:
        raise c.fail(f"{fld}.nodes", f"at most {MAX_NODES} nodes on one machine, got {nodes}")
    replicas = c.integer(f"{fld}.replicas", raw.get("replicas", min(nodes, 3)), 1)
    if replicas > nodes:
        raise c.fail(f"{fld}.replicas", f"cannot exceed the nodes ({nodes}) that keep them, got {replicas}")
    min_insync = c.integer(f"{fld}.min_insync", raw.get("min_insync", replicas // 2 + 1), 1)
    if min_insync > replicas:
        raise c.fail(f"{fld}.min_insync", f"cannot exceed the replicas ({replicas}), got {min_insync}")
    return ClusterShape(nodes=nodes, replicas=replicas, min_insync=min_insync)


def shape_problem(system: str, shape: ClusterShape) -> str | None:
    """Why ``system``'s broker cannot run as ``shape`` here, or None (brokerless systems have no shape)."""
    from harness.brokers import provisioner

    prov = provisioner(system)
    if prov is None:
        return None if shape == SINGLE_NODE else f"{system} is brokerless: it has no nodes to cluster"
    if shape.nodes > prov.max_nodes:
        return (f"{system} runs as {prov.max_nodes} node{'s' if prov.max_nodes != 1 else ''} at most here "
                f"({prov.cluster_note})")
    return None


def default_shape(system: str, asked: ClusterShape | None) -> tuple[ClusterShape, str]:
    """The shape of a variant of ``system`` without its own ``cluster`` in a scenario asking for ``asked``,
    and, when it had to stay one node, why."""
    from harness.brokers import provisioner

    if asked is None or provisioner(system) is None:
        return SINGLE_NODE, ""
    problem = shape_problem(system, asked)
    if problem is None:
        return asked, ""
    prov = provisioner(system)
    assert prov is not None
    if prov.max_nodes > 1:
        return SINGLE_NODE, f"{system} runs at most {prov.max_nodes} nodes here; the scenario asked for {asked.nodes}"
    return SINGLE_NODE, prov.cluster_note


def variant_shape(c: _Checker, where: str, system: str, opts: dict[str, Any],
                  scenario: ClusterShape | None) -> tuple[ClusterShape, str]:
    """Pop a variant's ``cluster`` from its options and check it; else the scenario's, where it applies."""
    if "cluster" not in opts:
        return default_shape(system, scenario)
    shape = parse_cluster(c, f"{where}.cluster", opts.pop("cluster"))
    problem = shape_problem(system, shape)
    if problem is not None:
        raise c.fail(f"{where}.cluster", problem)
    return shape, ""


def parse_node_fault(c: _Checker, where: str, item: Mapping[str, Any], at: float, hosts: Hosts) -> Fault:
    action = str(item["action"])
    node: str | int = item.get("node", "leader")
    if isinstance(node, bool) or not (node in NODE_ROLES or (isinstance(node, int) and 0 <= node < MAX_NODES)):
        raise c.fail(f"{where}.node", f"must be leader, follower or a node index (0..{MAX_NODES - 1}), got {node!r}")
    duration = down = 0.0
    if action in ("pause-node", "isolate-node"):
        if "duration" not in item:
            raise c.fail(f"{where}.duration", f"required for {action}: how long it lasts (e.g. 5s)")
        duration = c.seconds(f"{where}.duration", item["duration"])
    elif "duration" in item:
        raise c.fail(f"{where}.duration", "only pause-node and isolate-node last a duration (restart-node: down)")
    if "down" in item:
        if action != "restart-node":
            raise c.fail(f"{where}.down", "only restart-node has a down time")
        down = 0.0 if item["down"] in (0, "0", "0s") else c.seconds(f"{where}.down", item["down"])
    if action == "isolate-node" and len(hosts.nodes) < 2:
        raise c.fail(f"{where}.action", "isolate-node cuts a node's host off: give the scenario "
                                        "'hosts: {nodes: [n1, n2, n3]}', one host per node")
    return Fault(at=at, action=action, node=node, duration=duration, down=down)
