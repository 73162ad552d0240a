"""The optional compiled record decoder and encoder (``_fastdecode`` and ``_fastencode``,
two small C extensions) and the switch between them and the pure-Python path.

The extensions are built by ``pip install`` when a C compiler is at hand and skipped
otherwise (the ``--py-files`` zip never has them); everything works without them. The
decoder only ever decodes input it fully checked: on anything it does not accept it
answers None and the pure path decodes the same bytes and raises its own error, so both
paths accept and refuse exactly the same input. The encoder writes the same bytes as the
pure path (``encode_arrow.encode_rows``) and leaves every error to it.

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
try:
    from . import _fastencode as _enc
except ImportError:
    _enc = None

_enabled = os.environ.get("PYKAFKA_PURE_PYTHON", "") in ("", "0")


def available() -> bool:
    """Whether the compiled decoder and encoder were built and import."""
    return _ext is not None and _enc is not None


def module():
    """The decoder's extension module when it is in use, else None."""
    return _ext if _enabled else None


def encoder():
    """The encoder's extension module when it is in use, else None."""
    return _enc if _enabled else None


@contextlib.contextmanager
def forced(use: bool):
    """Use (or not) the compiled decoder and encoder inside the block; ``use`` True
    without the extensions built raises RuntimeError (a test asking for them must not pass
    silently)."""
    global _enabled
    if use and not available():
        raise RuntimeError("the compiled decoder and encoder protocol.records._fastdecode "
                           "and _fastencode are not both built")
    before = _enabled
    _enabled = use
    try:
        yield
    finally:
        _enabled = before
