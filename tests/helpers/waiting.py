"""Waiting for a condition instead of sleeping a fixed time."""

from __future__ import annotations

import time
from typing import TypeVar
from collections.abc import Callable

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    timeout: float,
    what: str | Callable[[], str],
    interval: float = 0.05,
) -> T:
    """``condition()``'s first true value, polled every ``interval`` seconds; an
    AssertionError saying ``what`` did not happen when ``timeout`` seconds pass first
    (``what`` may be a callable, asked then: a message that tells the state reached).
    A condition may raise to give up at once (a query that failed, a process that died)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"{said}: not within {timeout} s")
        time.sleep(interval)  # the poll of the one wait helper
