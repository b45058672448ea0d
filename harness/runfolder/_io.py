"""The two things every file of a run folder goes through: an atomic write and redaction of secrets."""

from __future__ import annotations

import io
import os
import re
import uuid
from pathlib import Path

import pandas as pd

# scheme://[user]:password@ — the user may be empty (redis://:secret@host); the password ends at the '@'
# and never spans whitespace, quotes or a '/' (a '/' in a password must be percent-encoded in a URL).
_SECRET = re.compile(r"(://[^:/@\s\"']*:)([^@\s\"'/]+)(@)")


def redact(text: str) -> str:
    """``text`` with every URL password replaced by ``***``: ``amqp://u:secret@h`` -> ``amqp://u:***@h``.

    Works on one URL and on any text holding URLs (a manifest, an error message)."""
    return _SECRET.sub(r"\1***\3", text)


def atomic_write(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary sibling and a rename; return ``path``.

    ``os.replace`` is atomic on one file system, so a reader (or an interrupted run) sees the old file, the
    new one or none, never half of one. The parent folder is created when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A unique sibling name (not mkstemp) so the file gets the usual umask permissions, not 0600.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def write_frame(frame: pd.DataFrame, parquet: Path, csv: bool = False) -> list[Path]:
    """``frame`` as ``parquet`` (and ``.csv`` beside it when ``csv``), each written atomically."""
    written = [atomic_write(parquet, parquet_bytes(frame))]
    if csv:
        written.append(atomic_write(parquet.with_suffix(".csv"), frame.to_csv(index=False).encode("utf-8")))
    return written
