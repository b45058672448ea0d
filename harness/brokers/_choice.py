"""Which backend provisions a system's broker, and why (or why none can)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from harness.brokers import _containers, _images
from harness.brokers._base import redact
from harness.brokers._registry import provisioner
from harness.drivers import SYSTEMS
from harness.drivers.base import DriverError

BACKENDS = ("auto", "external", "containers", "process")


@dataclass(frozen=True)
class BackendChoice:
    """``backend`` is "external", "containers", "process", or None when no backend can serve the system;
    ``reason`` is one sentence: why this backend, or what to install/start/pass so one can be used. ``note`` is
    set when ``auto`` passed over the containers backend although a Docker engine answers (no image), one line
    saying why, for the run to print."""

    system: str
    backend: str | None
    reason: str
    note: str = ""


def containers_reason(system: str) -> str | None:
    """None when the containers backend can run ``system``'s broker here (an engine answers and its image is
    here or can be pulled), else why not (one clause)."""
    if not _containers.docker_available():
        return "no Docker engine answers"
    return None if _images.choose(system).image is not None else _images.choose(system).reason


def choose_backend(system: str, backend: str = "auto", url: str | None = None) -> BackendChoice:
    """Decide how ``system``'s broker is provided.

    ``auto``: external when ``url`` is given, else containers when a Docker engine answers and the broker's
    image is here or can be pulled (``_images.choose``), else a local process when the broker binary exists,
    else None. An explicit backend is checked, never substituted; a registry that does not answer never makes
    the choice fail. Raises DriverError for an unknown system or backend name.
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

    no_containers = containers_reason(system) if backend in ("auto", "containers") else "not asked for"
    if no_containers is None:
        image = _images.choose(system).image
        assert image is not None
        return BackendChoice(system, "containers", f"in {image.describe()}")
    if backend == "containers":
        return BackendChoice(system, None, f"{no_containers}; start Docker, run `make images`, or choose another backend")

    missing = prov.process_unavailable_reason()
    engine = no_containers != "no Docker engine answers"
    note = f"{system}: the process backend, not containers: {no_containers}" if backend == "auto" and engine else ""
    if missing is None:
        reason = prov.local_description() + ("" if backend == "process" else f"; containers: {no_containers}")
        return BackendChoice(system, "process", reason, note)
    if backend == "process":
        return BackendChoice(system, None, missing)
    return BackendChoice(
        system,
        None,
        f"{no_containers} and {missing}, or pass --broker {system}={prov.schemes[0]}://HOST:PORT",
    )
