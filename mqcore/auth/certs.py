"""CURVE certificate files in the ZPL format that czmq and pyzmq use (``name.key``/``name.key_secret``).

A public certificate holds ``public-key``; a secret one both keys. Keys are written as 40 Z85
characters inside double quotes under a ``curve`` section; lines starting with ``#`` are comments.
"""

from __future__ import annotations

import datetime
import glob
import os
from collections.abc import Mapping

from mqcore.zmtp import curve_keypair

__all__ = ["create_certificates", "load_certificate", "load_certificates"]

_BANNER = """#   ****  Generated on {date} by mqcore  ****
#   ZeroMQ CURVE {kind} Certificate
#   {advice}

"""
_PUBLIC_ADVICE = "Exchange securely, or verify the contents of this file after exchange."
_SECRET_ADVICE = "DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions."


def _write_certificate(path: str, public_key: bytes, secret_key: bytes | None,
                       metadata: Mapping[str, str] | None) -> None:
    kind, advice = ("Secret", _SECRET_ADVICE) if secret_key else ("Public", _PUBLIC_ADVICE)
    lines = [_BANNER.format(date=datetime.datetime.now().isoformat(timespec="seconds"), kind=kind,
                            advice=advice), "metadata\n"]
    for key, value in (metadata or {}).items():
        lines.append(f'    {key} = "{value}"\n')
    lines.append("curve\n")
    lines.append(f'    public-key = "{public_key.decode("ascii")}"\n')
    if secret_key:
        lines.append(f'    secret-key = "{secret_key.decode("ascii")}"\n')
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)


def create_certificates(key_dir: str | os.PathLike[str], name: str,
                        metadata: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Make a new key pair and write ``<key_dir>/<name>.key`` (public) and ``<name>.key_secret``
    (both keys); returns the two paths. OSError if the folder cannot be written."""
    public_key, secret_key = curve_keypair()
    base = os.path.join(os.fspath(key_dir), name)
    public_file, secret_file = base + ".key", base + ".key_secret"
    _write_certificate(public_file, public_key, None, metadata)
    _write_certificate(secret_file, public_key, secret_key, metadata)
    return public_file, secret_file


def _value(line: bytes) -> bytes:
    return line.split(b"=", 1)[1].strip(b" \t'\"")


def load_certificate(filename: str | os.PathLike[str]) -> tuple[bytes, bytes | None]:
    """(public key, secret key or None) from a certificate file, as Z85 bytes.

    OSError if the file cannot be read; ValueError if it holds no public key."""
    public_key: bytes | None = None
    secret_key: bytes | None = None
    with open(filename, "rb") as f:
        for raw in f:
            line = raw.strip()
            if line.startswith(b"public-key"):
                public_key = _value(line)
            elif line.startswith(b"secret-key"):
                secret_key = _value(line)
    if not public_key:
        raise ValueError(f"no public key found in {os.fspath(filename)}")
    return public_key, secret_key


def load_certificates(directory: str | os.PathLike[str] = ".") -> dict[bytes, bool]:
    """The public keys of every ``*.key`` file in ``directory``, as ``{z85_key: True}``.

    OSError if ``directory`` is not a folder."""
    folder = os.fspath(directory)
    if not os.path.isdir(folder):
        raise OSError(f"invalid certificate directory: {folder}")
    certs: dict[bytes, bool] = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.key"))):
        public_key, _ = load_certificate(path)
        certs[public_key] = True
    return certs
