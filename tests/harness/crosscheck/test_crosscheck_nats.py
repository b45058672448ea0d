"""``nats bench`` in its JetStream mode against a real nats-server (one node, R1): the stream it is given
has the variant's storage, the tool runs with the variant's window and fetch size for the case's seconds,
reports both rates, and the stream is gone afterwards. Needs nats-server and natscli (``make brokers``); skipped without them, failed
in CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.brokers import broker_control, provision
from harness.brokers.nats import jetstream_request
from harness.crosscheck._tool import CrossCase
from harness.crosscheck.tools.nats import NatsBench
from tests.harness.drivers.conformance import require_backend


@pytest.mark.broker
def test_jetstream_mode_runs_on_a_stream_of_its_own_and_removes_it(tmp_path: Path) -> None:
    require_backend("nats", "process")
    tool = NatsBench()
    if tool.missing():
        if os.environ.get("CI") == "true":
            pytest.fail(tool.missing())
        pytest.skip(tool.missing())
    options = {"jetstream": True, "storage": "memory", "window": 200, "fetch": 50}
    # a second: the probe run (PROBE_MSGS) mostly lasts that long already, else one sized run follows
    case = CrossCase("nats", 100, guarantee="at-least-once", options=options, seconds=1.0)
    with provision("nats", backend="process") as endpoint:
        control = broker_control(endpoint)
        result = tool.run(case, endpoint, tmp_path / "tool", control.pids() if control else [])
        listing, _ = jetstream_request([endpoint.url], "$JS.API.STREAM.NAMES", b"", 5)
    assert result.receiver_rate > 0 and result.sender_rate > 0
    assert result.steady_s >= case.seconds  # sized by time, not by a message count
    command = " ".join(result.command)
    assert "bench js pub async" in command and "--batch 200" in command
    assert "memory storage, 1 replica" in result.note
    assert not listing.get("streams"), f"streams left behind: {listing.get('streams')}"
