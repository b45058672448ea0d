"""One key for a case: its raw file name, its columns, its manifest entry, and every spelling of an unpaced
rate read back as one."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness import units
from harness.runfolder import CaseKey


@pytest.mark.parametrize("spelling", [None, float("nan"), "max"])
def test_every_spelling_of_an_unpaced_rate_is_one_key(spelling: object) -> None:
    key = CaseKey("s", "zmq", "default", 100, spelling, 0)  # type: ignore[arg-type]
    assert key == CaseKey("s", "zmq", "default", 100, None, 0)
    assert key.rate is None and key.raw_name == "s__zmq__default__100B__rate-max__rep0.parquet"
    assert math.isnan(key.columns()["rate"]) and key.manifest_entry()["rate"] is None
    assert units.rate_text(spelling) == "max"


def test_a_key_reads_back_from_its_table_row_and_its_manifest_entry() -> None:
    key = CaseKey("s", "kafka", "rf3", 1024, 500, 2)
    assert key.stem == "s__kafka__rf3__1024B__rate-500__rep2"
    row = pd.DataFrame([key.columns()]).iloc[0]  # numpy scalars, as a table gives them
    assert CaseKey.of(row) == key == CaseKey.of(key.manifest_entry())
    assert units.rate_text(500.0, units.count) == units.count(500.0)
    assert key.describe() == "s kafka/rf3 1024 B @ 500/s rep 3"
