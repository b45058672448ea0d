"""Brokers that run from Maven Central jars (Apache Kafka, Apache RocketMQ): where `make brokers` puts them.

The pom of each (``harness/brokers/maven/<name>.xml``) is the one definition of its version
(``<broker.version>``); `make brokers` copies its runtime dependencies into
``.brokers/<name>-<version>/lib`` at the top of the checkout (``MQBENCH_BROKERS_DIR`` overrides the
folder) and marks the copy complete with a ``.complete`` file, so a half-done download is never used.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.brokers._spec import ImageFiles

MAVEN_DIR = Path(__file__).resolve().parent / "maven"
JVM_INSTALL = "install Java and Maven (`apt-get install maven openjdk-17-jre-headless`) and run `make brokers`"
# Java 17 closes the JDK internals these brokers reach into (RocketMQ's mmap'd files, Kafka's and
# RocketMQ's direct buffers); both brokers' own start scripts pass the same flags.
JAVA17_OPENS = (
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
)


def cache_dir() -> Path:
    """The folder holding ``<name>-<version>/lib`` (ignored by git)."""
    override = os.environ.get("MQBENCH_BROKERS_DIR")
    return Path(override) if override else MAVEN_DIR.parents[2] / ".brokers"


def pinned_version(name: str) -> str:
    """The ``<broker.version>`` of ``harness/brokers/maven/<name>.xml``."""
    text = (MAVEN_DIR / f"{name}.xml").read_text()
    match = re.search(r"<broker\.version>\s*([^<\s]+)\s*</broker\.version>", text)
    if match is None:
        raise ValueError(f"{MAVEN_DIR / (name + '.xml')} has no <broker.version>")
    return match.group(1)


def lib_dir(name: str) -> Path | None:
    """The complete jar folder of ``name`` at its pinned version, or None when `make brokers` has not
    fetched it (or the fetch did not finish)."""
    lib = cache_dir() / f"{name}-{pinned_version(name)}" / "lib"
    return lib if (lib / ".complete").is_file() else None


def java() -> str | None:
    """The ``java`` executable (``JAVA_HOME`` first, then PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def unavailable_reason(name: str, display: str) -> str | None:
    """None when ``java`` and the jars of ``name`` are here; else one sentence saying what to do."""
    if java() is None:
        return f"no Java runtime was found for {display}; {JVM_INSTALL}"
    if lib_dir(name) is None:
        where = cache_dir() / f"{name}-{pinned_version(name)}"
        return f"the {display} jars are not in {where}; run `make brokers` (it fetches them with Maven)"
    return None


class JarsBroker:
    """Mixin for a provisioner whose broker runs from the jars of ``jars`` (a pom name); ``display`` is the
    broker's proper name, used in sentences."""

    jars: str
    display: str
    install_hint = JVM_INSTALL
    files: ImageFiles | None

    def jar_path(self) -> str:
        """The ``-cp`` argument: every jar of ``jars`` here, or of the ``lib`` folder of the image the launch
        is prepared for."""
        if self.files is not None:
            return f"{self.files.paths['lib']}/*"
        return classpath(self.jars)

    def find_binary(self) -> str | None:
        return None if self.process_unavailable_reason() else java()

    def process_unavailable_reason(self) -> str | None:
        return unavailable_reason(self.jars, self.display)

    def local_description(self) -> str:
        return f"{self.display} {pinned_version(self.jars)} (Maven Central jars) is installed"


def classpath(name: str) -> str:
    """The ``-cp`` argument for every jar of ``name`` (call after :func:`unavailable_reason` said None)."""
    lib = lib_dir(name)
    if lib is None:
        raise OSError(unavailable_reason(name, name))
    return f"{lib}/*"
