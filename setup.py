"""Only the optional C extension lives here; everything else is in pyproject.toml.

harness/runner/_hotloop.c holds the runner's per-message loops in C. Where it cannot be built (no C compiler
or no Python headers) the install goes on without it, the runner uses the same loops in Python, and every
run's manifest says which it used (docs/harness-cost.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "harness.runner._hotloop",
            sources=["harness/runner/_hotloop.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
