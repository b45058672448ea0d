"""Scenarios: what to measure, loaded from YAML into frozen dataclasses.

A scenario file holds one scenario, or several as YAML documents separated by ``---``. Every field is
checked: an unknown or misspelt field, a wrong type or an impossible value raises ScenarioError with one
line naming the file, the field and what is allowed.

Fields (see ``scenarios/*.yaml`` for examples)::

    name: smoke-queue          # required: letters, digits, '-', '_'
    description: text          # optional
    pattern: queue             # pubsub | queue | reqrep
    systems: [zmq, mqcore]     # optional; default: every available system
    message_sizes: [100, 1KB]  # bytes, or with a unit: B, KB, KiB, MB, MiB; one run per size (>= 6 B)
    messages: 20000            # measured messages per producer ...
    duration: 10s              # ... or seconds of sending per repetition (exactly one of the two)
    rate: max                  # max, or total msgs/s over all producers (open loop); a list sweeps rates
    producers: 1
    consumers: 1
    topics: 1
    warmup: 1000               # messages per producer sent first and discarded
    repetitions: 3
    payload: random            # random | fixed (zeros)
    timeout: 30                # seconds without progress before a run is declared stalled
    variants:                  # per-system options handed to the driver
      rabbitmq: {persistent: true, confirms: true}          # one variant
      kafka: [{name: acks1, acks: 1}, {name: all, acks: all}]  # several: each is run
    consumer_rate: 2000        # optional: each consumer handles at most this many msgs/s (a slow consumer;
                               # the pause comes after the receive stamp, so latency includes the queueing)
    faults:                    # optional: carried out by the runner at ``at`` after the common start
      - {at: 2s, action: restart-broker, down: 0.5s}   # SIGKILL the broker, start it again (same port/data)
      - {at: 4s, action: restart-consumer, target: 0}  # SIGKILL consumer 0, start it again
    # actions: kill-broker, restart-broker, kill-consumer, restart-consumer, kill-producer,
    # restart-producer, restart-peer (brokerless systems: restart-consumer; broker systems: restart-broker)
    hosts: {broker: server, producers: a, consumers: b}   # optional: network namespaces (harness.network)
    # network actions, each {at, action, duration, host (default: the consumers' host)}: delay (delay,
    # jitter), bandwidth (rate: 10mbit), partition, reset -- see docs/network.md
    cluster: {nodes: 3, replicas: 3, min_insync: 2}   # optional: brokers as replicated clusters (a variant
                               # may give its own ``cluster``); node faults {at, action, node: leader |
                               # follower | index}: kill-node, restart-node (down), pause-node (duration),
                               # isolate-node (duration; needs hosts: {nodes: [a, b, c]}) -- docs/clusters.md
"""

from harness.scenario._model import (
    FAULT_ACTIONS,
    MIN_MESSAGE_SIZE,
    NETWORK_ACTIONS,
    NODE_ACTIONS,
    Fault,
    Hosts,
    Scenario,
    ScenarioError,
    Variant,
)
from harness.scenario._parse import load_scenarios, parse_scenario

__all__ = [
    "FAULT_ACTIONS",
    "MIN_MESSAGE_SIZE",
    "Fault",
    "Hosts",
    "NETWORK_ACTIONS",
    "NODE_ACTIONS",
    "Scenario",
    "ScenarioError",
    "Variant",
    "load_scenarios",
    "parse_scenario",
]
