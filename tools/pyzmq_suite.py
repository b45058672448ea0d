"""Run pyzmq's own test suite with ``zmq`` resolving to mqcore, and print passed/failed per file.

Usage: python tools/pyzmq_suite.py PYZMQ_CHECKOUT [--ref TAG] [--against pyzmq] [--failed] [FILE ...]

PYZMQ_CHECKOUT is a git clone (bare or not) of https://github.com/zeromq/pyzmq; the tests are taken
at the tag of the pyzmq version installed here (``v<version>``, or ``--ref``), so mqcore is held to
the same tests as the pyzmq it is compared with. Each test file runs in its own pytest process with
the tools/zmq_is_mqcore.py plugin, which does what a user does: ``sys.modules["zmq"] = mqcore``.
``--against pyzmq`` runs the same files on the real pyzmq, for the reference count. See
docs/pyzmq-suite.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
# The files issue 19 holds mqcore to; the rest of pyzmq's tests cover libzmq/pyzmq internals.
DEFAULT_FILES = (
    "test_pair", "test_pubsub", "test_reqrep", "test_multipart", "test_socket", "test_context",
    "test_poll", "test_monitor", "test_security", "test_auth", "test_asyncio", "test_device",
    "test_error", "test_z85", "test_curve_keygen", "test_constants", "test_proxy_steerable",
    "test_future",
)
FILE_TIMEOUT_S = 600
TEST_TIMEOUT_S = 60
HOW_TO_GET = "get one with: git clone https://github.com/zeromq/pyzmq"


class SuiteError(Exception):
    """A problem the user can fix (missing checkout, unknown tag); printed as one sentence."""


@dataclass
class FileResult:
    name: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failed_ids: list[str] = field(default_factory=list)
    note: str = ""


def _git(checkout: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, check=False)


def extract_tests(checkout: Path, ref: str, dest: Path) -> None:
    """Put ``tests/`` and ``pytest.ini`` of ``ref`` from the git clone ``checkout`` into ``dest``."""
    if not checkout.is_dir():
        raise SuiteError(f"no pyzmq checkout at {checkout}; {HOW_TO_GET}")
    if _git(checkout, "rev-parse", "--git-dir").returncode != 0:
        raise SuiteError(f"{checkout} is not a git clone of pyzmq; {HOW_TO_GET}")
    if _git(checkout, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode != 0:
        raise SuiteError(f"the pyzmq clone at {checkout} has no {ref}; update it with "
                         f"`git -C {checkout} fetch --tags` or choose another with --ref")
    archive = _git(checkout, "archive", "--format=tar", ref, "tests", "pytest.ini")
    if archive.returncode != 0:
        raise SuiteError(f"{ref} of {checkout} has no tests/ and pytest.ini to run: "
                         f"{archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def run_file(root: Path, name: str, against: str, workdir: Path) -> FileResult:
    """Run one test file of pyzmq's suite in its own pytest process; count its outcomes."""
    report = workdir / f"{name}.xml"
    cmd = [sys.executable, "-m", "pytest", "-c", str(root / "pytest.ini"), "--rootdir", str(root),
           "-o", "addopts=--import-mode=importlib", "-p", "no:cacheprovider", "-q",
           f"--timeout={TEST_TIMEOUT_S}", f"--junitxml={report}", str(root / "tests" / f"{name}.py")]
    if against == "mqcore":
        cmd[3:3] = ["-p", "zmq_is_mqcore"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(TOOLS), os.environ.get("PYTHONPATH")])))
    result = FileResult(name)
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.wait(timeout=FILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the file's own process group, started above
        proc.wait()
        result.note = f"stopped after {FILE_TIMEOUT_S} s"
    if not report.exists():
        result.note = result.note or f"pytest exited {proc.returncode} without a report"
        return result
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = {child.tag for child in case}
        if outcome & {"failure", "error"}:
            result.failed += 1
            result.failed_ids.append(case.get("name", "?"))
        elif "skipped" in outcome:
            result.skipped += 1
        else:
            result.passed += 1
    return result


def print_table(results: list[FileResult], against: str, ref: str, show_failed: bool) -> None:
    print(f"pyzmq {ref} tests on {against}")
    print(f"{'file':<24}{'passed':>8}{'failed':>8}{'skipped':>9}  note")
    for r in results:
        print(f"{r.name:<24}{r.passed:>8}{r.failed:>8}{r.skipped:>9}  {r.note}")
        if show_failed:
            for test_id in r.failed_ids:
                print(f"    FAILED {test_id}")
    total = (sum(r.passed for r in results), sum(r.failed for r in results),
             sum(r.skipped for r in results))
    print(f"{'total':<24}{total[0]:>8}{total[1]:>8}{total[2]:>9}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a git clone of pyzmq's repository")
    parser.add_argument("files", nargs="*", help="test files to run (default: the 18 of issue 19)")
    parser.add_argument("--ref", help="tag or commit of the tests (default: v<installed pyzmq>)")
    parser.add_argument("--against", choices=("mqcore", "pyzmq"), default="mqcore",
                        help="which library `import zmq` gives the tests")
    parser.add_argument("--failed", action="store_true", help="list each failing test")
    args = parser.parse_args(argv)
    ref = args.ref or f"v{version('pyzmq')}"
    names = [Path(f).stem for f in args.files] or list(DEFAULT_FILES)
    try:
        with tempfile.TemporaryDirectory(prefix="pyzmq-suite-") as tmp:
            root = Path(tmp)
            extract_tests(args.checkout.resolve(), ref, root)
            missing = [n for n in names if not (root / "tests" / f"{n}.py").exists()]
            if missing:
                raise SuiteError(f"pyzmq {ref} has no tests/{missing[0]}.py; list its tests/ folder "
                                 "for the file names")
            results = [run_file(root, name, args.against, root) for name in names]
    except SuiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_table(results, args.against, ref, args.failed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
