"""Where a run folder lives: a local folder, a ``file://`` URI, or a folder under any URI pyarrow's file
systems open (``hdfs://``, ``s3://``, ``gs://``; ``s3a://`` and ``s3n://``, Hadoop's names, are read as
``s3://``), so runs can be kept on storage every host of a cluster sees.

A local location (a path or ``file://``) is an ordinary :class:`~pathlib.Path`: nothing changes for local
runs. Every other location goes through :class:`Store`, whose writes are atomic where the file system's
rename is (local, HDFS); on an object store a file appears when its upload completes.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pyarrow.fs as pafs

#: Hadoop's names for S3, which pyarrow calls s3.
_S3_ALIASES = ("s3a", "s3n")


def is_uri(location: str | Path) -> bool:
    """Whether ``location`` names a folder by URI (``scheme://...``) rather than a local path."""
    return isinstance(location, str) and "://" in location and not location.startswith("file://")


def local_path(location: str | Path) -> Path:
    """``location`` as a local path: a ``Path``, a path string or a ``file://`` URI (``file:///abs/dir``)."""
    if isinstance(location, str) and location.startswith("file://"):
        return Path(unquote(urlsplit(location).path))
    return Path(location)


def _readable(uri: str) -> str:
    scheme, rest = uri.split("://", 1)
    return f"s3://{rest}" if scheme in _S3_ALIASES else uri


class StoreError(Exception):
    """A location that cannot be opened (unknown scheme, no access); one sentence naming it."""


class Store:
    """A folder under a URI, through pyarrow's file system for its scheme. Paths are relative to the
    folder and use ``/``."""

    def __init__(self, uri: str, opened: tuple[pafs.FileSystem, str] | None = None) -> None:
        self.uri = uri.rstrip("/")
        if opened is None:
            try:
                opened = pafs.FileSystem.from_uri(_readable(self.uri))
            except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError) or an OSError
                raise StoreError(f"{uri}: cannot open this location ({exc}); use a local path, file://, "
                                 "hdfs:// or s3:// (s3a://)") from None
        self.fs: pafs.FileSystem = opened[0]
        self.root: str = opened[1]

    def child(self, relpath: str) -> Store:
        """The folder ``relpath`` below this one (same file system connection)."""
        relpath = relpath.strip("/")
        return Store(f"{self.uri}/{relpath}", (self.fs, self.full(relpath)))

    def full(self, relpath: str = "") -> str:
        """The file system's path of ``relpath`` (what ``self.fs`` takes)."""
        return f"{self.root}/{relpath}" if relpath else self.root

    def url(self, relpath: str = "") -> str:
        """``relpath`` as a URI pyarrow opens on any host (``s3a://`` spelled ``s3://``)."""
        return _readable(f"{self.uri}/{relpath}" if relpath else self.uri)

    def _info(self, relpath: str) -> pafs.FileInfo:
        return self.fs.get_file_info(self.full(relpath))

    def is_dir(self, relpath: str = "") -> bool:
        return bool(self._info(relpath).type == pafs.FileType.Directory)

    def is_file(self, relpath: str) -> bool:
        return bool(self._info(relpath).type == pafs.FileType.File)

    def mtime(self, relpath: str = "") -> float:
        stamp = self._info(relpath).mtime
        return stamp.timestamp() if stamp is not None else 0.0

    def read_bytes(self, relpath: str) -> bytes:
        with self.fs.open_input_stream(self.full(relpath)) as stream:
            return bytes(stream.read())

    def write_bytes(self, relpath: str, data: bytes) -> None:
        """Write ``relpath`` under a temporary sibling name, then rename it into place."""
        parent, _, name = relpath.rpartition("/")
        self.fs.create_dir(self.full(parent) if parent else self.root, recursive=True)
        tmp = f"{parent + '/' if parent else ''}.{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with self.fs.open_output_stream(self.full(tmp)) as stream:
                stream.write(data)
            self.fs.move(self.full(tmp), self.full(relpath))
        except BaseException:
            if self.is_file(tmp):
                self.fs.delete_file(self.full(tmp))
            raise

    def make_dir(self, relpath: str = "") -> None:
        self.fs.create_dir(self.full(relpath), recursive=True)

    def names(self, relpath: str = "", suffix: str = "") -> list[str]:
        """Sorted names of the entries of folder ``relpath`` ending in ``suffix`` (hidden ones left out)."""
        if not self.is_dir(relpath):
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(self.full(relpath), recursive=False))
        return sorted(i.base_name for i in infos if i.base_name.endswith(suffix) and not i.base_name.startswith("."))
