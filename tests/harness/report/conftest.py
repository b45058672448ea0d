"""Report fixtures: a synthetic run and the report written for it once per session (pandas engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report import write_report
from tests.harness.pipeline.synthetic import build_run


@pytest.fixture(scope="session")
def report_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("report-results"), "run-report", complete=False)


@pytest.fixture(scope="session")
def report_html(report_run: Path) -> Path:
    return write_report([report_run])
