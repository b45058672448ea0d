"""mqbench harness: scenarios, drivers, runner, metrics, pipeline, reports."""

__version__ = "0.1.0"
