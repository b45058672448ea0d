"""Shared by the tests of the runner's C loops."""

from __future__ import annotations

import os

import pytest

from harness.runner import _hot


def require_hotloop() -> None:
    """Skip without the C extension, with the reason; in CI (``CI=true``) its absence is a failure."""
    if _hot.send_stamped is None:
        reason = "harness/runner/_hotloop.c is not built here (no C compiler or Python headers?)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
