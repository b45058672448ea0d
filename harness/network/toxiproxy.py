"""Toxiproxy: one ``toxiproxy-server`` process per host that serves something, and a client of its HTTP API.

A host's Toxiproxy is its front door: servers (a broker, a brokerless binder) listen on the host's own
loopback, and each client host reaches them through a proxy of its own, listening on the host's address
and forwarding to ``127.0.0.1:<port>``. Faults then act on one client host's proxies: ``latency`` (delay,
jitter) and ``reset_peer`` toxics, added and removed through the API (``/proxies``, ``/proxies/NAME/toxics``).

The server is started with ``start_new_session`` under ``ip netns exec`` (which execs it: the pid we keep is
the server's) and stopped by that pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from harness import _watchdog
from harness.network._netns import exec_prefix

BINARY = "toxiproxy-server"
INSTALL_HINT = "install it with `make toxiproxy` (Go module proxy, into .brokers/bin)"
START_TIMEOUT = 10.0


class ToxiproxyError(RuntimeError):
    """Toxiproxy is missing, did not start, or refused a request; one sentence."""


def find_binary() -> str | None:
    """``toxiproxy-server`` on PATH, else under ``${MQBENCH_BROKERS_DIR:-.brokers}/bin``."""
    found = shutil.which(BINARY)
    if found:
        return found
    from harness.brokers._jars import cache_dir

    local = cache_dir() / "bin" / BINARY
    return str(local) if local.is_file() and os.access(local, os.X_OK) else None


class Toxiproxy:
    """One running ``toxiproxy-server`` in ``namespace`` (None: the root one), its API on ``address:port``."""

    def __init__(self, namespace: str | None, address: str, api_port: int, log: Path) -> None:
        binary = find_binary()
        if binary is None:
            raise ToxiproxyError(f"{BINARY} is not installed; {INSTALL_HINT}")
        self.namespace, self.address = namespace, address
        self.api = f"http://{address}:{api_port}"
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                [*exec_prefix(namespace), binary, "-host", address, "-port", str(api_port)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.pid = self.popen.pid
        self._watched = _watchdog.watch_group(self.pid)  # stopped even if this process is killed
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                self._request("GET", "/version")
                return
            except ToxiproxyError:
                if self.popen.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    said = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
                    raise ToxiproxyError(
                        f"{BINARY} did not answer on {self.api} within {START_TIMEOUT:.0f} s"
                        + (f"; it said: {said[0]}" if said else "")
                    ) from None
                time.sleep(0.05)

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5.0) as resp:
                text = resp.read()
        except urllib.error.HTTPError as exc:
            raise ToxiproxyError(f"toxiproxy {method} {path}: {exc.code} {exc.read()[:200]!r}") from None
        except OSError as exc:
            raise ToxiproxyError(f"toxiproxy at {self.api} does not answer: {exc}") from None
        return json.loads(text) if text.strip().startswith((b"{", b"[")) else text

    def proxy(self, name: str, upstream_port: int, listen: str | None = None, upstream_host: str = "127.0.0.1") -> int:
        """Create proxy ``name`` listening on ``listen`` (default: a free port of this host's address),
        forwarding to ``upstream_host:upstream_port``; returns the listening port."""
        made = self._request("POST", "/proxies", {
            "name": name, "listen": listen or f"{self.address}:0", "upstream": f"{upstream_host}:{upstream_port}",
            "enabled": True,
        })
        return int(str(made["listen"]).rpartition(":")[2])

    def add_toxic(self, proxy: str, name: str, kind: str, attributes: dict[str, Any], stream: str) -> None:
        """Add toxic ``name`` (``latency``, ``reset_peer``, ...) on ``stream`` (upstream: client to server)."""
        self._request("POST", f"/proxies/{proxy}/toxics", {
            "name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes,
        })

    def remove_toxic(self, proxy: str, name: str) -> None:
        with contextlib.suppress(ToxiproxyError):
            self._request("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def stop(self) -> None:
        """SIGTERM the server (by its pid), SIGKILL after a second; idempotent."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            try:
                self.popen.wait(1.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self.popen.wait(5.0)
        _watchdog.forget(self._watched)
