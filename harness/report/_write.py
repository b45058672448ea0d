"""``write_report``: read the runs' summary, then write figures, ``report.html`` and ``summary.md``."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.pipeline import Summary, load_summary, write_summary
from harness.report import crosscheck, evaluation
from harness.report._page import figure_name, render_html, render_markdown
from harness.report.figures import captions as figure_captions
from harness.report.figures import png_bytes, render_figures
from harness.report.headline import caption, headlines
from harness.report.headline import figure as headline_figure
from harness.runfolder import RunFolder
from harness.runfolder.schema import FEATURE_MATRIX, FIGURES_DIR, REPORT_HTML, REPORT_MD

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
    out = RunFolder.open(out_dir) if out_dir.is_dir() else _new_folder(out_dir)
    heads = headlines(summary)
    figures = {figure_name(head): headline_figure(summary, head) for head in heads}
    figures.update(render_figures(summary))
    pngs = {name: png_bytes(fig) for name, fig in figures.items()}
    for name, png in pngs.items():
        out.write_file(f"{FIGURES_DIR}/{name}.png", png)
    captions = {**figure_captions(summary), **{figure_name(head): caption(head) for head in heads}}
    extra_html = extra_md = ""
    extra_pngs: dict[str, bytes] = {}
    extra_captions: dict[str, str] = {}
    section = evaluation.render(summary)
    if section is not None:
        eval_figures, extra_html, extra_md = section
        for name, fig in eval_figures.items():
            extra_pngs[name] = png_bytes(fig)
            out.write_file(f"{FIGURES_DIR}/{name}.png", extra_pngs[name])
            extra_captions[name] = fig.get_suptitle() or name
        matrix = evaluation.load_evaluation(summary).matrix
        if not matrix.empty:
            out.write_file(FEATURE_MATRIX, matrix.to_csv(index=False).encode())
    cross = crosscheck.render(summary)
    if cross is not None:
        extra_html, extra_md = extra_html + cross[0], extra_md + cross[1]
    out.write_file(REPORT_MD, render_markdown(summary, [*pngs, *extra_pngs], extra=extra_md, heads=heads).encode())
    page = render_html(summary, pngs, captions, extra=extra_html, extra_pngs=extra_pngs, extra_captions=extra_captions,
                       heads=heads)
    return out.write_file(REPORT_HTML, page.encode())


def _new_folder(path: Path) -> RunFolder:
    path.mkdir(parents=True, exist_ok=True)
    return RunFolder.open(path)


def write_report(
    run_dirs: Iterable[Path | str],
    out_dir: Path | None = None,
    *,
    engine: Engine = "auto",
    spark_master: str | None = None,
) -> Path:
    """Write the report of ``run_dirs`` from their stored summary; return the path of ``report.html``.

    A run without a summary yet (interrupted, or recorded by an older mqbench) is summarised first with
    ``engine`` and the summary stored in its folder; a stored summary is never recomputed here.
    ``out_dir`` defaults to the run folder (one run) or a new ``results/report-<timestamp>/`` (several),
    which then also gets the joined summary tables. Writes ``figures/*.png``, ``summary.md`` and
    ``report.html`` (self-contained: figures embedded as base64 PNG), each to a temporary name first.
    Raises :class:`harness.pipeline.PipelineError` for a missing run folder, a run without raw data or
    (Spark engine) missing Java.
    """
    paths = [Path(p) for p in run_dirs]
    summary = load_summary(paths, engine=engine, spark_master=spark_master)
    out = Path(out_dir) if out_dir is not None else default_out_dir(paths)
    if out.resolve() not in {p.resolve() for p in paths}:
        write_summary(summary, out)
    return write_report_from_summary(summary, out)
