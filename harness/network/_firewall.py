"""What a run's bridge needs from the machine's firewall, and nothing more.

With bridge netfilter on (the ``br_netfilter`` module, which Docker loads: ``net.bridge.bridge-nf-call-iptables
= 1``), a packet bridged from one of our hosts to another passes iptables' FORWARD chain, whose policy a
default ``dockerd`` sets to DROP: the hosts of a run would then not reach each other. When the FORWARD chain is
not plainly accepting, the run inserts one rule at its top that accepts what enters and leaves by the run's own
bridge, with the bridge's name as its comment, and deletes that rule at teardown (``Network.close``, which the
``with`` block, Ctrl-C and the atexit fallback all reach). Nothing else is touched: the policy, the other rules
and other bridges (Docker's among them) stay as they are. A rule left by a run killed with SIGKILL names a bridge
that no longer exists; the next run removes it (``sweep``), and ``leftovers()`` lists it until then.

Only ``iptables`` is used (the same binary, nf_tables or legacy, that Docker uses on this machine); a machine
without it or without bridge netfilter needs nothing.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
CHAIN = "FORWARD"
_OURS = re.compile(r"--comment \"?(?P<bridge>[A-Za-z0-9_.-]+)\"?")


def _iptables(*args: str) -> subprocess.CompletedProcess[str]:
    # -w: wait for the xtables lock, which other runs and Docker take too
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)


def _rule(bridge: str) -> tuple[str, ...]:
    return ("-i", bridge, "-o", bridge, "-m", "comment", "--comment", bridge, "-j", "ACCEPT")


def bridge_filtered() -> bool:
    """True when bridged packets pass iptables here (bridge netfilter on and an ``iptables`` to ask)."""
    try:
        on = BRIDGE_NF.read_text().strip() == "1"
    except OSError:
        return False
    return on and shutil.which("iptables") is not None


def forward_rules() -> list[str]:
    """``iptables -S FORWARD`` (the policy line first), or [] when it cannot be read."""
    listed = _iptables("-S", CHAIN)
    return listed.stdout.splitlines() if listed.returncode == 0 else []


def needs_rule() -> bool:
    """Whether a bridge of ours needs an accept rule: bridged packets pass FORWARD and that chain does more
    than accept everything (a DROP policy, as Docker sets, or any rule that could drop)."""
    return bridge_filtered() and forward_rules() not in ([], [f"-P {CHAIN} ACCEPT"])


def allow(bridge: str) -> str | None:
    """Insert the accept rule for ``bridge`` at the top of FORWARD; None when done, else why not (one
    clause, for the sentence of a host that cannot reach another)."""
    done = _iptables("-I", CHAIN, "1", *_rule(bridge))
    if done.returncode != 0:
        return f"`iptables -I {CHAIN} 1 {' '.join(_rule(bridge))}` failed: {done.stderr.strip() or done.returncode}"
    return None


def remove_script(bridge: str) -> str:
    """A shell line that does what :func:`remove` does (for the watchdog: harness/_watchdog.py)."""
    rule = " ".join(shlex.quote(a) for a in _rule(bridge))
    return f"while iptables -w -D {CHAIN} {rule} 2>/dev/null; do :; done"


def remove(bridge: str) -> None:
    """Delete every accept rule of ``bridge`` (no error when there is none)."""
    while _iptables("-D", CHAIN, *_rule(bridge)).returncode == 0:
        pass


def ours(prefix: str) -> list[str]:
    """The bridges named by FORWARD rules of ours whose bridge name starts with ``prefix``."""
    if not bridge_filtered():
        return []
    found = []
    for line in forward_rules():
        match = _OURS.search(line)
        if match and match["bridge"].startswith(prefix) and line.endswith("-j ACCEPT"):
            found.append(match["bridge"])
    return found


def sweep(prefix: str, exists: Callable[[], set[str]]) -> list[str]:
    """Delete the rules of ours (bridge names starting with ``prefix``) whose bridge is not among ``exists()``
    (left by a killed run); returns their bridges. The rules are read before the bridges are listed: a run
    makes its bridge before its rule, so a bridge listed first could miss that of a run starting meanwhile
    and take its live rule, read next, for a stale one (its hosts would then not reach each other)."""
    rules = ours(prefix)
    present = exists() if rules else set()
    stale = [bridge for bridge in rules if bridge not in present]
    for bridge in stale:
        remove(bridge)
    return stale
