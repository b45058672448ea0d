"""The one error type of the regression check."""

from __future__ import annotations


class RegressionInputError(ValueError):
    """Input the check cannot use (missing file, no reference system, too few repetitions, a baseline
    for another scenario). ``str()`` is one sentence naming what is wrong and what to do; the CLI prints
    it and exits with status 2."""
