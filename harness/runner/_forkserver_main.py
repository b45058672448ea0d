"""Imported first in the runner's forkserver: the program's main module, once, so that no worker runs it again.

Every process a forkserver forks prepares itself as a spawned one: unless the main module is already the
one the parent ran (same ``__file__``, or same module name for ``python -m``), it runs it again as
``__mp_main__``. For the ``mqbench`` script that is the whole CLI's imports (pandas, scipy, matplotlib, the
drivers), about 1.5 s per worker here, and a case has two workers or more. CPython's forkserver means to
load it once itself (``"__main__"`` in its preload list), but 3.11's never learns the path: it asks the
parent for ``main_path`` where the parent's preparation data says ``init_main_from_path`` (and a module run
by name it does not preload at all). So the parent starts the server with the path or name in
:data:`MAIN_VARIABLE` (:func:`start_forkserver`) and this module, preloaded there, loads it the way a
spawned child would, and takes the variable out of the server's environment (its workers' children never
see it).

It also keeps a worker that starts after its runner ended from printing a traceback: the runner's shared
objects (semaphores) are gone by then, so the child cannot even read what it was to do (``FileNotFoundError``
rebuilding a ``SemLock``); a Ctrl-C while a case's workers start leaves such a child.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from multiprocessing import forkserver, process, spawn
from types import TracebackType

#: The environment variable by which the runner tells its forkserver its main module: ``path:FILE`` or
#: ``name:MODULE``.
MAIN_VARIABLE = "MQBENCH_FORKSERVER_MAIN"


@functools.cache
def _main() -> str | None:
    """This program's main module as multiprocessing hands it to a child: ``path:FILE`` (absolute, normalised)
    or ``name:MODULE``; None for an interactive session. It does not change while the program runs."""
    data = spawn.get_preparation_data("mqbench")
    for kind, key in (("path", "init_main_from_path"), ("name", "init_main_from_name")):
        if key in data:
            return f"{kind}:{data[key]}"
    return None


def start_forkserver() -> None:
    """Start multiprocessing's forkserver if it is not running, telling it the main module."""
    main = _main()
    if main is not None:
        os.environ[MAIN_VARIABLE] = main
    try:
        forkserver.ensure_running()
    finally:
        os.environ.pop(MAIN_VARIABLE, None)


def _runner_gone(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """The server's children's excepthook (the forkserver calls it for a child that fails before it runs)."""
    frames = traceback.extract_tb(tb)
    if issubclass(kind, FileNotFoundError) and any(f.name == "__setstate__" and f.filename.endswith(
            os.path.join("multiprocessing", "synchronize.py")) for f in frames):
        return  # the runner ended before this worker started: there is nothing for it to do, or to say
    sys.__excepthook__(kind, value, tb)


def _load_main() -> None:
    main = os.environ.pop(MAIN_VARIABLE, None)
    # only in the server itself: `python -c "from multiprocessing.forkserver import main; main(...)"`
    if not main or sys.argv[:1] != ["-c"]:
        return
    sys.excepthook = _runner_gone
    kind, _, what = main.partition(":")
    process.current_process()._inheriting = True  # type: ignore[attr-defined]  # as the forkserver does
    try:
        if kind == "path" and os.path.exists(what):
            spawn.import_main_path(what)
        elif kind == "name":
            spawn._fixup_main_from_name(what)  # type: ignore[attr-defined]  # what a spawned child calls
    except Exception:  # noqa: BLE001 - the server must run: each worker then loads the main module itself, and
        pass  # says what fails there, as without this module
    finally:
        del process.current_process()._inheriting  # type: ignore[attr-defined]


_load_main()
