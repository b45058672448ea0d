"""Atomic file output: write to a temporary name in the target folder, then rename.

``os.replace`` is atomic on one file system, so a reader (or an interrupted report) never sees a
half-written file: it sees the old file, the new one, or none.
"""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path

import pandas as pd


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary sibling file and a rename; return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A unique sibling name (not mkstemp) so the file gets the usual umask permissions, not 0600.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    """UTF-8 text version of :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_frame(
    frame: pd.DataFrame, parquet: Path | None = None, csv: Path | None = None
) -> list[Path]:
    """Write ``frame`` as Parquet and/or CSV, each atomically; return the paths written."""
    written: list[Path] = []
    if parquet is not None:
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        written.append(atomic_write_bytes(parquet, buffer.getvalue()))
    if csv is not None:
        written.append(atomic_write_text(csv, frame.to_csv(index=False)))
    return written
