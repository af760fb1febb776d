"""The runner python/test_goldens.py and python/test_inmotion.py share: each runs under
pytest or as a plain script (CI has no pytest), and a test that cannot run here says why."""

from __future__ import annotations

import sys


class Skip(Exception):
    pass


_SCRIPT = False  # set by run_tests(): no pytest


def skip(msg):
    """Skips the running test with `msg`: pytest's skip under pytest, else a `Skip` that
    `run_tests` prints."""
    if not _SCRIPT:
        try:
            import pytest
        except ImportError:
            pass
        else:
            pytest.skip(msg)
    raise Skip(msg)


def run_tests(namespace):
    """Runs every `test_*` function of a module's `globals()` in order, printing PASS, SKIP
    or FAIL for each; 1 if any failed."""
    global _SCRIPT
    _SCRIPT = True
    failed = 0
    for name, fn in [(k, v) for k, v in namespace.items() if k.startswith("test_") and callable(v)]:
        try:
            fn()
            print(f"PASS {name}")
        except Skip as e:
            print(f"SKIP {name}: {e}")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {name}: {e}")
    sys.stdout.flush()
    return 1 if failed else 0
