"""What every subcommand shares on the terminal: the console, the one error printer, the one table renderer.

A user-caused error is one line ``mqbench: <sentence>`` on stderr and exit status 2 (:func:`fail`); a
table is built by :func:`table` from cells already written as text (numbers through :mod:`harness.units`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and found a problem: incomplete run, regression, failed calibration
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: Console width when stdout is not a terminal (logs, pipes) and COLUMNS is unset; rich would pick 80
#: and squeeze wide tables into wrapped cells.
LOG_WIDTH = 160

# Between two columns: one space of padding on each side; the box draws no vertical lines, only a rule
# under the header, in ASCII so that a line's length in bytes is its width on screen (logs, `awk length`).
_GAP = 2
_BOX = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)


def console() -> Console:
    """The console every command prints to (stdout)."""
    out = Console()
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(width=LOG_WIDTH)
    return out


def narrow(out: Console, width: int) -> Console:
    """A console printing where ``out`` prints, wrapping within ``width`` columns (or fewer, as ``out``)."""
    return Console(file=out.file, width=min(out.width, width), force_terminal=out.is_terminal, no_color=out.no_color)


def run_footer(out: Console, run_dir: object, complete: bool, problems: Iterable[str]) -> int:
    """The last lines of a command that wrote a run folder: where it is, whether it is complete, each
    problem's first line; returns the exit status (EXIT_OK or EXIT_FAILED)."""
    out.print(f"results: {run_dir}  ({'complete' if complete else 'INCOMPLETE'})", highlight=False)
    for p in problems:
        out.print(f"  [yellow]-[/] {p.splitlines()[0]}", highlight=False)
    return EXIT_OK if complete else EXIT_FAILED


def fail(message: object, code: int = EXIT_USAGE) -> int:
    """Print ``mqbench: <message>`` as one line on stderr; return ``code`` for the command to exit with."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    print(f"mqbench: {'; '.join(lines)}", file=sys.stderr, flush=True)
    return code


@dataclass(frozen=True)
class Column:
    """A column of :func:`table`. Numbers are right-aligned and never cut; text may be shortened with an
    ellipsis so that the table fits the width it is given. A header may hold a line break."""

    header: str
    numeric: bool = False


def numeric(*headers: str) -> tuple[Column, ...]:
    """Numeric columns with these headers."""
    return tuple(Column(h, numeric=True) for h in headers)


def _text_width(text: str | Text) -> int:
    """Columns the widest line of ``text`` takes on screen."""
    plain = text.plain if isinstance(text, Text) else text
    return max((cell_len(line) for line in plain.splitlines()), default=0)


def _text_limits(columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], width: int) -> list[int | None]:
    """How wide each text column may be so that the table fits ``width``; numbers keep their width."""
    natural = [max([_text_width(c.header)] + [_text_width(r[i]) for r in rows]) for i, c in enumerate(columns)]
    spare = width - sum(natural) - _GAP * (len(columns) - 1)
    limits: list[int | None] = [None] * len(columns)
    text = sorted((natural[i], i) for i, c in enumerate(columns) if not c.numeric)
    # Take the excess from the widest text columns first, keeping each at least its header's width.
    while spare < 0 and text:
        wide, i = text.pop()
        floor = max(_text_width(columns[i].header), 3)
        cut = min(-spare, wide - floor)
        if cut > 0:
            limits[i] = wide - cut
            spare += cut
    return limits


def table(
    columns: Sequence[Column],
    rows: Iterable[Sequence[str | Text]],
    *,
    title: str | None = None,
    caption: str | None = None,
    width: int | None = None,
) -> Table:
    """A table of ``rows``, one line per row. A cell is plain text (brackets are shown, never read as
    markup) or a rich ``Text`` carrying its own style.

    With ``width``, text columns are shortened (ending in "…") until the table is at most ``width``
    columns wide; print it with ``console.print(table, width=width)``.
    """
    cells = [list(r) for r in rows]
    limits = _text_limits(columns, cells, width) if width else [None] * len(columns)
    out = Table(
        title=title,
        caption=caption,
        title_justify="left",
        caption_justify="left",
        box=_BOX,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for column, limit in zip(columns, limits, strict=True):
        out.add_column(
            column.header,
            justify="right" if column.numeric else "left",
            no_wrap=True,
            overflow="ellipsis",
            max_width=limit,
        )
    for r in cells:
        out.add_row(*(c if isinstance(c, Text) else Text(c) for c in r))
    return out
