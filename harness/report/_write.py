"""``write_report``: summarize runs, then write figures, ``report.html`` and ``summary.md`` atomically."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.pipeline import Summary, summarize, write_summary
from harness.pipeline._files import atomic_write_bytes, atomic_write_text
from harness.report import evaluation
from harness.report._page import render_html, render_markdown
from harness.report.figures import FIGURES, png_bytes, render_figures

if TYPE_CHECKING:
    from harness.pipeline._summary import Engine


def default_out_dir(run_dirs: list[Path]) -> Path:
    """The run folder itself for one run; ``<results>/report-<UTC timestamp>/`` beside them for several."""
    if len(run_dirs) == 1:
        return run_dirs[0]
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return run_dirs[0].parent / f"report-{stamp}"


def write_report_from_summary(summary: Summary, out_dir: Path) -> Path:
    """Write ``figures/*.png``, ``report.html`` and ``summary.md`` for ``summary`` into ``out_dir``."""
    figures = render_figures(summary)
    pngs = {name: png_bytes(fig) for name, fig in figures.items()}
    for name, png in pngs.items():
        atomic_write_bytes(out_dir / "figures" / f"{name}.png", png)
    captions = {name: (FIGURES[name].__doc__ or name).strip().splitlines()[0] for name in pngs}
    extra_html = extra_md = ""
    extra_pngs: dict[str, bytes] = {}
    extra_captions: dict[str, str] = {}
    section = evaluation.render(summary)
    if section is not None:
        eval_figures, extra_html, extra_md = section
        for name, fig in eval_figures.items():
            extra_pngs[name] = png_bytes(fig)
            atomic_write_bytes(out_dir / "figures" / f"{name}.png", extra_pngs[name])
            extra_captions[name] = fig.get_suptitle() or name
        matrix = evaluation.load_evaluation(summary).matrix
        if not matrix.empty:
            atomic_write_text(out_dir / "feature_matrix.csv", matrix.to_csv(index=False))
    atomic_write_text(
        out_dir / "summary.md", render_markdown(summary, [*pngs, *extra_pngs], extra=extra_md)
    )
    return atomic_write_text(
        out_dir / "report.html",
        render_html(summary, pngs, captions, extra=extra_html, extra_pngs=extra_pngs, extra_captions=extra_captions),
    )


def write_report(
    run_dirs: Iterable[Path | str],
    out_dir: Path | None = None,
    *,
    engine: Engine = "auto",
    spark_master: str | None = None,
) -> Path:
    """Summarize ``run_dirs`` and write the report; return the path of ``report.html``.

    ``out_dir`` defaults to the run folder (one run) or a new ``results/report-<timestamp>/`` (several).
    Writes there: ``summary``/``aggregate``/``series``/``distribution`` ``.parquet`` + ``.csv``,
    ``figures/*.png``, ``summary.md`` and ``report.html`` (self-contained: figures embedded as base64 PNG),
    each to a temporary name first. Raises :class:`harness.pipeline.PipelineError` for a missing run folder,
    a run without raw data or (Spark engine) missing Java.
    """
    paths = [Path(p) for p in run_dirs]
    summary = summarize(paths, engine=engine, spark_master=spark_master)
    out = Path(out_dir) if out_dir is not None else default_out_dir(paths)
    write_summary(summary, out)
    return write_report_from_summary(summary, out)
