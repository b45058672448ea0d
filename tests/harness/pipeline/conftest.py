"""Shared fixtures: one synthetic run, one Spark session (local[2], UI off) and the summaries of both
engines, each built once per test session to keep the suite fast on a 2-core machine."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.pipeline import Summary, summarize
from tests.harness.pipeline.synthetic import build_run


@pytest.fixture(scope="session")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("results"))


def need_java() -> None:
    """Skip the calling test where no Java runtime exists (fail in CI, where one must)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if os.environ.get("CI") == "true":
            pytest.fail("Java 17 is required for the Spark tests in CI (openjdk-17-jre-headless)")
        pytest.skip("PySpark needs Java 17: install openjdk-17-jre-headless")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    need_java()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the engine's tasks import harness
    session = (
        SparkSession.builder.master("local[2]")
        .appName("mqbench-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def pandas_summary(synthetic_run: Path) -> Summary:
    return summarize([synthetic_run], engine="pandas")


@pytest.fixture(scope="session")
def spark_summary(synthetic_run: Path, spark: Any) -> Summary:
    return summarize([synthetic_run], engine="spark", spark=spark)
