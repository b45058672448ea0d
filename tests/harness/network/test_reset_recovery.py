"""A consumer whose connections are reset must come back by itself: the net-reset fault of `make evaluate`
(every connection of the consumer's host reset for 0.5 s, the broker untouched) through the whole harness,
with the clients in the runner's worker processes. RocketMQ's push consumer (librocketmq) stayed idle after
it (its pull request was lost with the connection, and the broker had dropped it from its group); its driver
now notices and the runner makes it again. Root and toxiproxy-server are needed (CI has both)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.harness.drivers.conformance import require_backend
from tests.harness.network.support import assert_nothing_left, require_toxiproxy, snapshot
from tests.harness.network.test_network_e2e import _run, _scenario


@pytest.mark.broker
def test_a_rocketmq_consumer_comes_back_after_its_connections_are_reset(tmp_path) -> None:  # type: ignore[no-untyped-def]
    require_toxiproxy()
    require_backend("rocketmq", "process")
    before = snapshot()
    # The reset comes 1 s in; the producer goes on for 5 s more, so most messages are sent after it, and the
    # run ends long before librocketmq's own 30 s timers would have brought the consumer back.
    out = _run(tmp_path, [_scenario("reset", ["rocketmq"], {"at": "1s", "action": "reset", "duration": "500ms"},
                                    duration="6s")])
    assert out.complete, out.problems
    rec = pd.read_csv(out.run_dir / "recovery.csv").iloc[0]
    assert rec["carried_out_as"] == "reset"
    summary = out.summary.iloc[0]
    assert summary["sent"] > 0 and summary["send_failed"] == 0
    assert summary["lost"] == 0, f"{summary['lost']} of {summary['sent']} accepted messages never arrived"
    assert summary["received"] >= summary["sent"]
    assert_nothing_left(before)
