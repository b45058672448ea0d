"""Imported first in the runner's forkserver: the program's main module, once, so that no worker runs it again.

Every process a forkserver forks prepares itself as a spawned one: unless the main module is already the
one the parent ran (same ``__file__``), it runs it again as ``__mp_main__``. For the ``mqbench`` script
that is the whole CLI's imports (pandas, scipy, matplotlib, the drivers), about 1.5 s per worker here, and
a case has two workers or more. CPython's forkserver means to load it once itself (``"__main__"`` in its
preload list), but 3.11's never learns the path: it asks the parent for ``main_path`` where the parent's
preparation data says ``init_main_from_path``. So the parent starts the server with the path in
:data:`MAIN_PATH_VARIABLE` (:func:`start_forkserver`) and this module, preloaded there, loads it the way the
forkserver would have, and takes the variable out of the server's environment (its workers' children never
see it).
"""

from __future__ import annotations

import os
import sys
from multiprocessing import forkserver, process, spawn

#: The environment variable by which the runner tells its forkserver the main module's file.
MAIN_PATH_VARIABLE = "MQBENCH_FORKSERVER_MAIN"


def start_forkserver() -> None:
    """Start multiprocessing's forkserver if it is not running, telling it the main module's file (as
    multiprocessing hands it to a child: absolute, normalised; none for an interactive session or a main
    module run by name, which a child does not run again)."""
    path = spawn.get_preparation_data("mqbench").get("init_main_from_path")
    if path is None:
        forkserver.ensure_running()
        return
    os.environ[MAIN_PATH_VARIABLE] = path
    try:
        forkserver.ensure_running()
    finally:
        os.environ.pop(MAIN_PATH_VARIABLE, None)


def _load_main() -> None:
    path = os.environ.pop(MAIN_PATH_VARIABLE, None)
    # only in the server itself: `python -c "from multiprocessing.forkserver import main; main(...)"`
    if not path or sys.argv[:1] != ["-c"] or not os.path.exists(path):
        return
    process.current_process()._inheriting = True  # type: ignore[attr-defined]  # as the forkserver does
    try:
        spawn.import_main_path(path)
    finally:
        del process.current_process()._inheriting  # type: ignore[attr-defined]


_load_main()
