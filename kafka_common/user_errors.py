"""What a connector error looks like when it leaves the connector for Spark: its message and
at most three frames of the connector's code, not the dozens of frames of retry loops and
connection pools between the method Spark called and the line that raised.

``@user_errors`` on a class Spark calls (the data source, its readers and writers) wraps
each of its methods that implements one of Spark's (``schema``, ``reader``, ``partitions``,
``read``, ``latestOffset``, ``write``, ``commit``...). An error of the connector's own
(a class defined in one of its packages: ``ConfigError``, ``KafkaConnectionError``,
``BrokerError``...) leaves that method with three frames: the wrapper, the method Spark
called, and the line that raised it; its cause keeps its message and loses its frames. Any
other exception (an ``IndexError`` is a bug) leaves untouched, with all its frames. The full
traceback of a trimmed error is logged at DEBUG on the ``pykafka.errors`` logger first.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from protocol.version import RUNTIME_NAMES

__all__ = ["OUR_PACKAGES", "MAX_FRAMES", "user_errors", "trimmed"]

log = logging.getLogger("pykafka.errors")

#: The connector's top-level packages: errors of classes defined there are trimmed.
OUR_PACKAGES = frozenset(RUNTIME_NAMES)
#: The most frames of the connector's code a trimmed error shows.
MAX_FRAMES = 3

_WRAPPED = "__pykafka_user_errors__"
C = TypeVar("C", bound=type)


def is_ours(exc: BaseException) -> bool:
    """Whether ``exc`` is one of the connector's own errors (not a bug's exception)."""
    return type(exc).__module__.split(".")[0] in OUR_PACKAGES


def _frames(tb: TracebackType | None) -> list[TracebackType]:
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    return frames


def _chain(kept: list[TracebackType]) -> TracebackType | None:
    tb = None
    for entry in reversed(kept):
        tb = TracebackType(tb, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return tb


def _shorten_causes(exc: BaseException) -> None:
    """The cause keeps its message, without frames and without causes of its own (and
    goes when the error's message already quotes it); an implicit context ("during
    handling of...") is not shown."""
    cause = exc.__cause__
    if cause is exc or (cause is not None and str(cause) in str(exc)):
        exc.__cause__ = None
    elif cause is not None:
        cause.__traceback__ = None
        cause.__cause__ = None
        cause.__suppress_context__ = True
    exc.__suppress_context__ = True


def trimmed(exc: BaseException, keep: int = MAX_FRAMES - 1) -> BaseException:
    """``exc`` with its traceback cut to its first frame (the method Spark called) and its
    last ``keep - 1`` (where it was raised), and short causes. Logs the full one at DEBUG."""
    log.debug("%s: %s", type(exc).__name__, exc, exc_info=(type(exc), exc, exc.__traceback__))
    frames = _frames(exc.__traceback__)
    if len(frames) > keep:
        frames = frames[:1] + frames[len(frames) - keep + 1 :] if keep > 1 else frames[:keep]
    _shorten_causes(exc)
    return exc.with_traceback(_chain(frames))


def _wrap(func: Callable[..., Any]) -> Callable[..., Any]:
    # Re-raised here, the error's traceback starts with this wrapper's frame: it keeps two
    # frames beside it, the method called (the first) and the line that raised (the last).
    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def generator(*args: Any, **kwargs: Any) -> Any:
            try:
                return (yield from func(*args, **kwargs))
            except Exception as exc:
                if not is_ours(exc):
                    raise
                short = _short(exc)
                raise short from short.__cause__

        setattr(generator, _WRAPPED, True)
        return generator

    @functools.wraps(func)
    def method(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            if not is_ours(exc):
                raise
            short = _short(exc)
            raise short from short.__cause__

    setattr(method, _WRAPPED, True)
    return method


def _short(exc: BaseException) -> BaseException:
    """``exc`` trimmed, without the wrapper's frame (raising it puts that frame back)."""
    tb = exc.__traceback__
    return trimmed(exc.with_traceback(tb.tb_next if tb is not None else None))


def _spark_methods(cls: type) -> set[str]:
    """The public methods of Spark's data source classes that ``cls`` derives from."""
    names: set[str] = set()
    for base in cls.__mro__:
        if base.__module__.startswith("pyspark."):
            names |= {
                n for n, v in vars(base).items() if inspect.isfunction(v) and not n.startswith("_")
            }
    return names


def user_errors(cls: C) -> C:
    """Class decorator: every method of ``cls`` that implements one of Spark's (its own or
    inherited from one of the connector's classes) leaves with trimmed errors."""
    for name in sorted(_spark_methods(cls)):
        func = getattr(cls, name)
        if (
            inspect.isfunction(func)
            and func.__module__.split(".")[0] != "pyspark"  # not Spark's default
            and not getattr(func, _WRAPPED, False)
        ):
            setattr(cls, name, _wrap(func))
    return cls
