"""The ``mqbench`` subcommands, one module each (as asv's ``asv/commands/``).

Each module has ``NAME``, ``add_parser(subparsers) -> ArgumentParser`` and ``run(args, console) -> int``
(the exit status). They parse, call the package that does the work, and print through ``_terminal``: the
one console, the one error printer (``mqbench: <sentence>`` on stderr, exit 2), the one table renderer.
"""

from harness.commands import (
    baseline,
    calibrate,
    compare,
    crosscheck,
    history,
    images,
    regress,
    report,
    systems,
    validate,
)

#: In the order ``mqbench --help`` lists them.
COMMANDS = (compare, crosscheck, systems, images, validate, calibrate, report, history, regress, baseline)

__all__ = ["COMMANDS"]
