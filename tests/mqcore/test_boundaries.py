"""Who may touch what: the engine's and the codec's underscored state is theirs alone.

``mqcore/engine/`` (the connection and the lock protocol between its two threads) and ``mqcore/zmtp/``
(the sans-IO codec) are used from outside through their public names only: no module elsewhere in
mqcore, the harness or tools imports their private modules or names, or reads or writes an underscored
attribute of their objects. Found by reading the source (``ast``): the underscored names the classes of
each package define (methods, ``self._x`` attributes, ``__slots__``), then every attribute access on
anything but ``self``/``cls`` elsewhere. Tests are not held to it: the engine's white-box tests patch
its internals on purpose.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mqcore/engine", "mqcore/zmtp")
SCANNED = ("mqcore", "harness", "tools")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _defined(paths: Iterable[Path]) -> set[str]:
    """The underscored names the classes in ``paths`` define for their objects."""
    names: set[str] = set()
    for path in paths:
        for cls in ast.walk(_tree(path)):
            if not isinstance(cls, ast.ClassDef):
                continue
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                    names.add(node.name)
                elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                      and node.value.id == "self" and _private(node.attr)):
                    names.add(node.attr)
                elif (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                           for t in node.targets)):
                    names.update(c.value for c in ast.walk(node.value)
                                 if isinstance(c, ast.Constant) and isinstance(c.value, str) and _private(c.value))
    return names


def _private_members(package: str) -> set[str]:
    """``package``'s underscored member names that no class elsewhere defines too (``x._events`` is
    a SocketBase's as well as a ZmtpConnection's: the source alone cannot tell whose it is)."""
    return _defined((ROOT / package).glob("*.py")) - _defined(_outside(package))


def _violations(tree: ast.Module, where: str, package: str, members: set[str]) -> Iterator[str]:
    """What ``tree`` (a module outside ``package``) takes of ``package``'s private state."""
    dotted = package.replace("/", ".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(dotted):
            rest = node.module[len(dotted):]
            if rest.startswith("._"):
                yield f"{where}:{node.lineno}: imports the private module {node.module}"
            yield from (f"{where}:{node.lineno}: imports the private name {alias.name} from {node.module}"
                        for alias in node.names if _private(alias.name))
        elif isinstance(node, ast.Import):
            yield from (f"{where}:{node.lineno}: imports the private module {alias.name}"
                        for alias in node.names if alias.name.startswith(dotted + "._"))
        elif (isinstance(node, ast.Attribute) and node.attr in members
              and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            yield f"{where}:{node.lineno}: touches {ast.unparse(node)} ({package}'s own)"


def _outside(package: str) -> Iterator[Path]:
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if not path.is_relative_to(ROOT / package):
                yield path


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_outside_a_package_uses_its_private_state(package: str) -> None:
    members = _private_members(package)
    found = [v for path in _outside(package)
             for v in _violations(_tree(path), str(path.relative_to(ROOT)), package, members)]
    assert found == []


def test_the_check_finds_each_kind_of_trespass() -> None:
    members = _private_members("mqcore/engine")
    assert {"_handoff", "_read_general", "_engine"} <= members
    source = ("from mqcore.engine._inline import Inline\nfrom mqcore.engine import _x\nimport mqcore.engine._stream\n"
              "inline._handoff = None\nself._handoff = None\n")
    found = list(_violations(ast.parse(source), "m.py", "mqcore/engine", members))
    assert [line.split(":")[1] for line in found] == ["1", "2", "3", "4"]
    assert "inline._handoff" in found[-1]
