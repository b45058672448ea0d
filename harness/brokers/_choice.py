"""Which backend provisions a system's broker, and why (or why none can)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from harness.brokers import _containers
from harness.brokers._base import redact
from harness.brokers._registry import provisioner
from harness.drivers import SYSTEMS
from harness.drivers.base import DriverError

BACKENDS = ("auto", "external", "containers", "process")


@dataclass(frozen=True)
class BackendChoice:
    """``backend`` is "external", "containers", "process", or None when no backend can serve the system;
    ``reason`` is one sentence: why this backend, or what to install/start/pass so one can be used."""

    system: str
    backend: str | None
    reason: str


def choose_backend(system: str, backend: str = "auto", url: str | None = None) -> BackendChoice:
    """Decide how ``system``'s broker is provided.

    ``auto``: external when ``url`` is given, else containers when a Docker engine answers, else a local
    process when the broker binary exists, else None. An explicit backend is checked, never substituted.
    Raises DriverError for an unknown system or backend name.
    """
    if system not in SYSTEMS:
        raise DriverError(f"unknown system {system!r}; known systems: {', '.join(SYSTEMS)}")
    if backend not in BACKENDS:
        raise DriverError(f"unknown broker backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    prov = provisioner(system)
    if prov is None:
        return BackendChoice(system, None, f"{system} is brokerless; there is no broker to provision")

    if url is not None:
        if backend not in ("auto", "external"):
            return BackendChoice(
                system,
                None,
                f"a URL was given for {system}, which means an external broker; drop --backend {backend} or the URL",
            )
        scheme = urlsplit(url).scheme
        if scheme not in prov.schemes:
            return BackendChoice(
                system,
                None,
                f"{redact(url)!r} is not a {system} URL; use {' or '.join(s + '://' for s in prov.schemes)}",
            )
        return BackendChoice(system, "external", f"using the {system} broker at {redact(url)}")
    if backend == "external":
        return BackendChoice(
            system,
            None,
            f"the external backend needs a URL; pass --broker {system}={prov.schemes[0]}://HOST:PORT",
        )

    docker = backend in ("auto", "containers") and _containers.docker_available()
    if backend == "containers":
        if docker:
            return BackendChoice(system, "containers", "a Docker engine answers")
        return BackendChoice(system, None, "no Docker engine answers; start Docker or choose another backend")
    if docker:
        return BackendChoice(system, "containers", "a Docker engine answers")

    missing = prov.process_unavailable_reason()
    if missing is None:
        reason = prov.local_description() + (
            "" if backend == "process" else " and no Docker engine answers"
        )
        return BackendChoice(system, "process", reason)
    if backend == "process":
        return BackendChoice(system, None, missing)
    return BackendChoice(
        system,
        None,
        f"no Docker engine answers and {missing}, or pass --broker {system}={prov.schemes[0]}://HOST:PORT",
    )
