"""Broker provisioning: a throwaway broker per run, always torn down (also on Ctrl-C / SIGTERM).

Three backends: ``external`` (a URL the user gives; nothing is started), ``containers`` (testcontainers: the
process backend's launch inside the broker's image, the pinned official one or one `make images` built, with
host networking) and ``process`` (the broker's own binary on free loopback ports with a private data
directory). ``auto`` picks them in that order, containers only when an engine answers and the image is here or
can be pulled.

    choice = choose_backend("rabbitmq")          # BackendChoice(backend=..., reason=...)
    with provision("rabbitmq", logs_dir=run_dir / "logs") as endpoint:
        ...                                       # endpoint: harness.drivers.base.BrokerEndpoint
"""

from harness.brokers._choice import BACKENDS, BackendChoice, choose_backend, containers_reason
from harness.brokers._cluster import ClusterControl
from harness.brokers._ports import free_port, free_ports
from harness.brokers._provision import BrokerControl, Placement, advertises_address, broker_control, provision
from harness.brokers._registry import PROVISIONERS, provisioner

__all__ = [
    "BrokerControl",
    "ClusterControl",
    "broker_control",
    "BACKENDS",
    "BackendChoice",
    "PROVISIONERS",
    "choose_backend",
    "containers_reason",
    "free_port",
    "free_ports",
    "Placement",
    "advertises_address",
    "provision",
    "provisioner",
]
