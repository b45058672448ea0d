"""Hosts beside a firewall that filters bridged packets (Docker's): the run's own accept rule, its removal on
every way out, a rule left by a killed run swept, and one sentence when a host cannot reach another.

Each test runs in a private network namespace standing in for a machine (``support.machine``): its own
iptables, bridge netfilter setting and Docker engine, so that the DROP policy it sets never touches the
machine the other tests and sessions run on. The last test starts a real ``dockerd`` there with its default
firewall and runs `mqbench compare` across two hosts beside it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from harness.pipeline import run_folders
from tests.harness.network.support import Machine, machine, require_dockerd, require_root, require_toxiproxy

DOCKER_USER_RULE = ("-i", "docker0", "-o", "docker0", "-j", "ACCEPT")  # stands for Docker's own rules

MAKE_HOSTS = """
import json, sys
from harness.network import network, leftovers
from harness.network import _firewall
with network(["a", "b", "c"]) as net:
    during = {"rule": net.firewall_rule, "left": leftovers(net.prefix), "forward": _firewall.forward_rules()}
print(json.dumps({**during, "prefix": net.prefix, "after": leftovers(net.prefix),
                  "forward_after": _firewall.forward_rules()}))
"""


def _hosts(m: Machine) -> dict[str, object]:
    done = m.python(MAKE_HOSTS)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_hosts_reach_each_other_when_forward_drops_and_the_rule_goes_with_them(tmp_path: Path) -> None:
    require_root()
    with machine(tmp_path) as m:
        m.iptables("-P", "FORWARD", "DROP")
        m.iptables("-A", "FORWARD", *DOCKER_USER_RULE)
        got = _hosts(m)  # the network checks every pair of hosts before it is handed out
        bridge = f"{got['prefix']}br"
        assert got["rule"] is True
        assert f"{bridge} (iptables FORWARD rule)" in got["left"]  # type: ignore[operator]
        assert got["forward"][1] == f"-A FORWARD -i {bridge} -o {bridge} -m comment --comment {bridge} -j ACCEPT"  # type: ignore[index]
        assert got["after"] == []
        # the policy and the rules that were there stay as they were
        assert got["forward_after"] == ["-P FORWARD DROP", "-A FORWARD " + " ".join(DOCKER_USER_RULE)]


def test_a_plainly_accepting_forward_chain_gets_no_rule(tmp_path: Path) -> None:
    require_root()
    with machine(tmp_path) as m:
        got = _hosts(m)
        assert got["rule"] is False and got["forward"] == ["-P FORWARD ACCEPT"] and got["after"] == []


def test_a_host_that_cannot_reach_another_is_one_sentence_and_leaves_nothing(tmp_path: Path) -> None:
    require_root()
    code = """
from harness.network import NetworkError, network, leftovers
from harness.network import _firewall, hosts
_firewall.allow = lambda bridge: "refused here"  # as when iptables cannot be changed
prefixes = []  # the failed run's own (namespaces are machine-wide: other runs' may exist beside it)
made = hosts.Network.__init__
def recorded(self, names):
    try:
        made(self, names)
    finally:
        prefixes.append(self.prefix)
hosts.Network.__init__ = recorded
try:
    with network(["a", "b"]):
        print("made")
except NetworkError as exc:
    print(exc)
print(leftovers(prefixes[0]), _firewall.forward_rules())
"""
    with machine(tmp_path) as m:
        m.iptables("-P", "FORWARD", "DROP")
        done = m.python(code)
        assert done.returncode == 0, done.stderr[-3000:]
        sentence, left = done.stdout.strip().splitlines()
        assert sentence.startswith("host a (10.") and "cannot reach host b (10." in sentence
        assert "could not add its accept rule (refused here)" in sentence and "iptables -S FORWARD" in sentence
        assert "\n" not in sentence and "Traceback" not in done.stdout + done.stderr
        assert left == "[] ['-P FORWARD DROP']"  # no namespace, link or rule of the failed run (machines aside)


def test_a_rule_left_by_a_killed_run_is_swept_by_the_next_one(tmp_path: Path) -> None:
    require_root()
    code = """
from harness.network import network, leftovers
print(leftovers("mqn00000"))
with network(["a"]) as net:
    pass
print(leftovers("mqn00000"))
"""
    with machine(tmp_path) as m:
        m.iptables("-P", "FORWARD", "DROP")
        stale = "mqn00000br"  # no such bridge: its run was killed before its teardown
        m.iptables("-A", "FORWARD", "-i", stale, "-o", stale, "-m", "comment", "--comment", stale, "-j", "ACCEPT")
        done = m.python(code)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.split("\n")[:2] == [f"['{stale} (iptables FORWARD rule)']", "[]"]


SCENARIO = """
name: beside-docker
pattern: queue
systems: [zmq]
message_sizes: [100]
messages: 2000
warmup: 0
rate: 2000
hosts: {producers: prod, consumers: cons}
"""


def test_compare_across_hosts_beside_dockers_default_firewall(tmp_path: Path) -> None:
    """A real Docker engine with its default firewall (FORWARD policy DROP, its chains): a run across two hosts
    completes without loss, and afterwards the firewall is exactly Docker's again."""
    require_toxiproxy()
    require_dockerd()
    (tmp_path / "s.yaml").write_text(SCENARIO)
    mqbench = Path(sys.executable).parent / "mqbench"
    with machine(tmp_path, docker=True) as m:
        docker_rules = m.forward_rules()
        assert docker_rules[0] == "-P FORWARD DROP" and "-A FORWARD -j DOCKER-USER" in docker_rules
        done = m.run(str(mqbench), "compare", str(tmp_path / "s.yaml"), "--no-report", "--out", str(tmp_path / "res"))
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert m.forward_rules() == docker_rules
        assert m.leftovers() == []
    summary = pd.read_csv(run_folders(tmp_path / "res")[0] / "summary.csv")
    assert summary["lost"].tolist() == [0] and summary["received"].tolist() == [2000]
