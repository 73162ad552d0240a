"""The optional compiled record decoder (``_fastdecode``, a small C extension) and the
switch between it and the pure-Python path.

The extension is built by ``pip install`` when a C compiler is at hand and skipped
otherwise (the ``--py-files`` zip never has it); everything works without it. It only
ever decodes input it fully checked: on anything it does not accept it answers None and
the pure path decodes the same bytes and raises its own error, so both paths accept and
refuse exactly the same input.

``PYKAFKA_PURE_PYTHON=1`` in the environment turns it off for the process;
``forced(False)`` (a context manager) for a block, so tests run both paths on the same
bytes.
"""

from __future__ import annotations

import contextlib
import os

try:
    from . import _fastdecode as _ext
except ImportError:  # not built: the pure path
    _ext = None

_enabled = _ext is not None and os.environ.get("PYKAFKA_PURE_PYTHON", "") in ("", "0")


def available() -> bool:
    """Whether the compiled decoder was built and imports."""
    return _ext is not None


def module():
    """The extension module when it is in use, else None."""
    return _ext if _enabled else None


@contextlib.contextmanager
def forced(use: bool):
    """Use (or not) the compiled decoder inside the block; ``use`` True without the
    extension built raises RuntimeError (a test asking for it must not pass silently)."""
    global _enabled
    if use and _ext is None:
        raise RuntimeError("the compiled decoder protocol.records._fastdecode is not built")
    before = _enabled
    _enabled = use
    try:
        yield
    finally:
        _enabled = before
