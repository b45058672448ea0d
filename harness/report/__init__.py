"""Reports: pandas + matplotlib figures, a self-contained HTML report and a Markdown summary.

Public API::

    from harness.report import write_report
    html_path = write_report([Path("results/<run-id>")])      # -> results/<run-id>/report.html

Figures are also available one by one (``harness.report.figures``) for notebooks.
"""

from harness.report.figures import (
    FIGURES,
    latency_nines,
    latency_vs_rate,
    png_bytes,
    receiver_series,
    render_figures,
    throughput_vs_size,
)
from harness.report.headline import default_out_dir, write_report, write_report_from_summary
from harness.report.tables import delivery_table, results_table

__all__ = [
    "FIGURES",
    "default_out_dir",
    "delivery_table",
    "latency_nines",
    "latency_vs_rate",
    "png_bytes",
    "receiver_series",
    "render_figures",
    "results_table",
    "throughput_vs_size",
    "write_report",
    "write_report_from_summary",
]
