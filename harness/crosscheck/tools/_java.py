"""What a broker's Java benchmark tool needs beyond the one launcher (``_exec.Tools``): a Java runtime, the
tool's jars fetched by ``make brokers``, and small heaps."""

from __future__ import annotations

from harness.brokers import _jars
from harness.crosscheck._tool import Tool, ToolMissing

# Small heaps: two cores and the broker on the same machine (BROKERS.md).
TOOL_HEAP = ("-Xms64m", "-Xmx256m")


def missing_jar(pom: str, jar: str, display: str) -> str | None:
    """None when Java and the ``jar`` (its name before the version) of the ``pom`` jar folder are here,
    else one sentence saying what to do; ``display`` names the tool in it."""
    if _jars.java() is None:
        return f"no Java runtime for {display}; {_jars.JVM_INSTALL}"
    lib = _jars.lib_dir(pom)
    if lib is None or not any(lib.glob(f"{jar}-*.jar")):
        return f"the {jar} jar is not in {_jars.cache_dir()}; run `make brokers`"
    return None


def java_for(tool: Tool) -> str:
    """The ``java`` executable to run ``tool`` with; ToolMissing with the tool's sentence when it cannot run."""
    reason, java = tool.missing(), _jars.java()
    if reason or java is None:
        raise ToolMissing(reason or f"no Java runtime for {tool.name}; {_jars.JVM_INSTALL}")
    return java
