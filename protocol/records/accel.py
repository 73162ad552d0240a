"""The optional compiled record decoder and encoder (``_fastdecode`` and ``_fastencode``,
two small C extensions) and the switch between them and the pure-Python path.

The extensions are built by ``pip install`` when a C compiler is at hand and skipped
otherwise; everything works without them. The ``--py-files`` zip
(``scripts/build_pyfiles_zip.py``) carries them compiled for the Python that built it, in
``protocol/records/_compiled/`` with a manifest: a Python cannot import a shared object
from a zip, so when the installed import fails and this package came from a zip,
``zip_extensions.load`` extracts them to a private cache directory
(``$PYKAFKA_CACHE_DIR``, else ``~/.cache/pyspark-pykafka``), checks their SHA-256 and
loads them, provided they were built for this Python version; on anything else it logs one
debug line (logger ``pykafka.protocol.records``) and the pure path runs. ``origin()``
says where the extensions in use came from.

The decoder only ever decodes input it fully checked: on anything it does not accept it
answers None and the pure path decodes the same bytes and raises its own error, so both
paths accept and refuse exactly the same input. The encoder writes the same bytes as the
pure path (``encode_arrow.encode_rows``) and leaves every error to it.

``PYKAFKA_PURE_PYTHON=1`` in the environment turns it off for the process (and a zip's
extensions are then not even extracted); ``forced(False)`` (a context manager) for a
block, so tests run both paths on the same bytes.
"""

from __future__ import annotations

import contextlib
import os

try:
    from . import _fastdecode as _ext
except ImportError:  # not built (or a zip's package): the pure path, or the zip's below
    _ext = None
try:
    from . import _fastencode as _enc
except ImportError:
    _enc = None

_enabled = os.environ.get("PYKAFKA_PURE_PYTHON", "") in ("", "0")
_origin = "installed" if _ext is not None and _enc is not None else None

if _ext is None and _enc is None and _enabled:
    from . import zip_extensions as _zip_extensions

    _loaded = _zip_extensions.load(
        __name__.rpartition(".")[0], globals().get("__file__"), globals().get("__loader__")
    )
    if _loaded is not None:
        _ext, _enc = _loaded["_fastdecode"], _loaded["_fastencode"]
        _origin = "zip cache"
    del _loaded


def origin() -> str | None:
    """Where the compiled decoder and encoder came from: ``"installed"`` (imported beside
    this module), ``"zip cache"`` (extracted from the ``--py-files`` zip this package was
    imported from), or None when they are not both there (the pure path). Whether they are
    in use is ``module()``'s and ``encoder()``'s answer."""
    return _origin


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
        raise RuntimeError(
            "the compiled decoder and encoder protocol.records._fastdecode "
            "and _fastencode are not both built"
        )
    before = _enabled
    _enabled = use
    try:
        yield
    finally:
        _enabled = before
