"""Waiting for a condition instead of sleeping a fixed time."""

from __future__ import annotations

import time
from typing import TypeVar
from collections.abc import Callable

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """``condition()``'s first true value, polled every ``interval`` seconds; an
    AssertionError saying ``what`` did not happen when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)
