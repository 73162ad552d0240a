"""The connector's objects carry their own import path when the connector came from a zip.

Over Spark Connect a session can ship the connector as a Python artifact
(``spark.addArtifacts(zip, pyfile=True)``), but Spark 4.3 gives a streaming query's Python
workers no session artifacts (docs/loading.md, "Ways to load the connector"): the worker
that plans a streaming read, and the tasks of streaming reads and writes, cannot import
it. Yet those workers get the connector's objects pickled: the data source, the stream
reader, the stream writer. So when this process imported the connector from a zip (or
from the bytes of one, as below), those objects pickle as::

    itemgetter(1)((_put_on_path(<the zip's bytes>), <the object, pickled as usual>))

Unpickling builds the tuple in order: first ``_put_on_path``, a function pickled by value
(no module of the connector is needed to run it), which puts a finder on ``sys.meta_path``
that imports the connector's packages from those bytes, in memory (nothing is written, no code
comes from anywhere but that zip); then the object itself, whose class is now importable.
The finder goes in once per Python process, and not at all where the connector can be
imported already (installed, or the session's artifacts). A connector installed as usual
pickles its objects as usual: nothing is added.
"""

from __future__ import annotations

import functools
import operator
from typing import cast

from protocol.version import RUNTIME_NAMES


def connector_zip() -> bytes | None:
    """The bytes of the zip this process imported the connector from, or None."""
    loader = getattr(globals().get("__spec__"), "loader", None)
    archive = getattr(loader, "archive", None)  # zipimport.zipimporter
    if archive:
        cached = _ZIPS.get(archive)
        if cached is None:
            cached = _ZIPS[archive] = _sources_of(archive)
        return cached
    data = getattr(loader, "zip_bytes", None)  # imported by _put_on_path's finder
    return data if isinstance(data, bytes) else None


_ZIPS: dict[str, bytes] = {}


def _sources_of(archive: str) -> bytes:
    """The zip at ``archive`` with its ``.py`` entries only: what ``_put_on_path`` reads.
    The --py-files zip also carries byte-code for the Python that built it (three times
    the size), which would only weigh down every pickled reader and writer."""
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.endswith(".py"):
                dst.writestr(info, src.read(info))
    return out.getvalue()


class _Boot:
    """Unpickles as a call of ``_put_on_path(data)``."""

    def __init__(self, data: bytes):
        self.data = data

    def __reduce__(self):
        return _put_on_path, (self.data,)


class _Reduced:
    """Unpickles as ``reduced`` (a ``__reduce__`` tuple) says. Pickle takes a callable
    named ``__newobj__`` to mean "an object of the class in its arguments", and checks that
    this is the class of what it pickles (here ``_Reduced``): the same call, through a
    ``functools.partial``, passes that check."""

    def __init__(self, reduced: tuple):
        self.reduced = reduced

    def __reduce__(self):
        func, *rest = self.reduced
        if getattr(func, "__name__", "") in ("__newobj__", "__newobj_ex__"):
            func = functools.partial(func)
        return (func, *rest)


def with_import_path(reduced: tuple) -> tuple:
    """``reduced`` (what ``__reduce__``/``__reduce_ex__`` would return) preceded by the
    connector's zip when this process has the connector from one; else ``reduced``."""
    data = connector_zip()
    if data is None:
        return reduced
    return operator.itemgetter(1), ((_Boot(data), _Reduced(reduced)),)


class CarriesImportPath:
    """Mixed into the classes whose objects Spark pickles for its Python workers."""

    def __reduce_ex__(self, protocol):
        return with_import_path(cast(tuple, object.__reduce_ex__(self, protocol)))


def _put_on_path(data: bytes, top: tuple = RUNTIME_NAMES) -> None:
    """Let this process import the connector's packages from ``data`` (a zip's bytes).

    Pickled by value (see the ``__module__`` below), so it runs where the connector cannot be
    imported (``top``, the names the zip serves, travels with it as a default). Once per
    process; nothing where the connector is importable already."""
    import importlib.abc
    import importlib.util
    import io
    import sys as _sys
    import zipfile

    name = "PyKafkaZipFinder"
    if any(type(f).__name__ == name for f in _sys.meta_path):
        return
    if "kafka_source" in _sys.modules or importlib.util.find_spec("kafka_source") is not None:
        return
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        files = {
            n: z.read(n)
            for n in z.namelist()
            if n.endswith(".py") and n.split("/", 1)[0].removesuffix(".py") in top
        }

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        zip_bytes = data

        def _path(self, fullname):
            base = fullname.replace(".", "/")
            for path, package in ((base + "/__init__.py", True), (base + ".py", False)):
                if path in files:
                    return path, package
            return None, False

        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".", 1)[0] not in top:
                return None
            found, package = self._path(fullname)
            if found is None:
                return None
            spec = importlib.util.spec_from_loader(fullname, self, origin=found, is_package=package)
            spec.has_location = False  # type: ignore[union-attr]  # a loader: a spec
            return spec

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            found, _ = self._path(module.__name__)
            module.__file__ = f"<pyspark-pykafka zip>/{found}"
            code = compile(files[found], module.__file__, "exec")
            exec(code, module.__dict__)

    Finder.__name__ = Finder.__qualname__ = name
    _sys.meta_path.append(Finder())


# No importable module by this name: cloudpickle (Spark's pickler) ships the code by value.
_put_on_path.__module__ = "pyspark_pykafka_unpickle"
