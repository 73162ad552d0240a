"""The ``--py-files`` zip's compiled record decoder and encoder (issue 38): built into the zip
by ``scripts/build_pyfiles_zip.py``, extracted and loaded by ``protocol/records/accel.py``
(``zip_extensions.py``) in a Python that imports the connector from the zip.

No Spark, no broker. Each case runs a child of this virtualenv's Python with ``-S`` (no
``site``: the editable install's ``.pth`` line, which puts the checkout on the path, is not
read), ``PYTHONPATH`` = the zip and the virtualenv's site-packages (for pyarrow and numpy),
in an empty working directory, and a cache directory of its own
(``PYKAFKA_CACHE_DIR``); the child checks that ``protocol`` came from the zip.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import stat
import subprocess
import sys
import sysconfig
import textwrap
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE_PACKAGES = sysconfig.get_paths()["purelib"]
COMPILED = "protocol/records/_compiled/"
MANIFEST = COMPILED + "manifest.json"
# Another Python version to run the zip under (pyenv's, where there is one; no numpy there)
OTHER_PYTHON = (
    sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12.*/bin/python"))) or [""]
)[-1]

# The child: where the connector and the extensions came from, and a round trip through
# the compiled path and the pure one (the compiled one made to fail over to nothing).
PROBE = textwrap.dedent("""
    import json, logging, os, sys
    records = []
    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logging.getLogger("pykafka.protocol.records").addHandler(Keep())
    logging.getLogger("pykafka.protocol.records").setLevel(logging.DEBUG)

    import numpy as np
    import pyarrow as pa
    import protocol
    from protocol.records import accel, decode_records, encode_batch
    from protocol.records import decode_pending, encode_arrow
    zip_path = sys.argv[1]
    assert protocol.__file__.startswith(zip_path + os.sep), protocol.__file__
    assert accel.__file__.startswith(zip_path + os.sep), accel.__file__

    n = 300
    keys = pa.array([None if i % 7 == 0 else b"k%d" % i for i in range(n)], pa.binary())
    values = pa.array([b"v" * (i % 50) + b"%d" % i for i in range(n)], pa.binary())
    headers = pa.array([[{"key": "h", "value": b"%d" % i}] if i % 3 else []
                        for i in range(n)],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    ts = np.arange(n, dtype=np.int64) + 1_700_000_000_000

    def round_trip():
        blob = encode_batch(keys, values, headers=headers, timestamps_ms=ts,
                            producer_id=7, base_sequence=0)
        batch, next_offset = decode_records(blob, topic="t", partition=0, start_offset=0,
                                            include_headers=True)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        assert batch.column("value").to_pylist() == values.to_pylist()
        assert batch.column("key").to_pylist() == keys.to_pylist()
        assert next_offset == n
        return blob.hex(), sink.getvalue().to_pybytes().hex()

    report = {"origin": accel.origin(), "available": accel.available(),
              "decoder": getattr(accel.module(), "__file__", None),
              "encoder": getattr(accel.encoder(), "__file__", None),
              "sys_modules": getattr(sys.modules.get("protocol.records._fastdecode"),
                                     "__file__", None)}
    if accel.available():
        def refuse(*args, **kwargs):
            raise AssertionError("the compiled path fell back to the pure one")
        pure_section, decode_arena = encode_arrow._pure_section, decode_pending._decode_arena
        encode_arrow._pure_section = decode_pending._decode_arena = refuse
        with accel.forced(True):
            report["compiled"] = round_trip()
        encode_arrow._pure_section, decode_pending._decode_arena = pure_section, decode_arena
    with accel.forced(False):
        report["pure"] = round_trip()
    report["log"] = records
    print(json.dumps(report))
""")


def _build(out_dir: str, *flags: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "scripts", "build_pyfiles_zip.py"),
            "--out-dir",
            out_dir,
            *flags,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _env(cache: str | None, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYTHONPATH",
            "PYTHONHOME",
            "PYKAFKA_PURE_PYTHON",
            "PYKAFKA_CACHE_DIR",
            "VIRTUAL_ENV",
        )
        and not k.startswith("PYTEST_")
    }
    if cache is not None:
        env["PYKAFKA_CACHE_DIR"] = cache
    env.update(extra)
    return env


def _probe(zip_path: str, tmp_path, cache: str | None, **extra: str) -> dict:
    """What ``PROBE`` reports in a child that can import the connector only from
    ``zip_path``."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = _env(cache, PYTHONPATH=os.pathsep.join([zip_path, SITE_PACKAGES]), **extra)
    done = subprocess.run(
        [sys.executable, "-S", "-c", PROBE, zip_path],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert os.listdir(cwd) == []
    return json.loads(done.stdout)


def _manifest(zip_path: str) -> dict:
    with zipfile.ZipFile(zip_path) as zf:
        return json.loads(zf.read(MANIFEST))


def _copy(zip_path: str, out: str, change) -> str:
    """A copy of the zip with each entry's bytes as ``change(name, data)`` gives them."""
    with zipfile.ZipFile(zip_path) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, change(info.filename, src.read(info)))
    return out


def _pure_and_working(report: dict) -> None:
    assert report["origin"] is None and not report["available"]
    assert report["decoder"] is None and report["encoder"] is None
    assert "compiled" not in report
    assert len(report["pure"][0]) > 0


def test_the_zip_carries_both_extensions_for_this_python_with_their_manifest(pyfiles_zip):
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    with zipfile.ZipFile(pyfiles_zip) as zf:
        compiled = {
            info.filename: info for info in zf.infolist() if info.filename.startswith(COMPILED)
        }
        data = {name: zf.read(name) for name in compiled}
    assert sorted(compiled) == sorted(
        [MANIFEST, f"{COMPILED}_fastdecode{suffix}", f"{COMPILED}_fastencode{suffix}"]
    )
    assert {info.date_time for info in compiled.values()} == {(1980, 1, 1, 0, 0, 0)}
    manifest = json.loads(data[MANIFEST])
    assert manifest["format"] == 1 and sorted(manifest["extensions"]) == [
        "_fastdecode",
        "_fastencode",
    ]
    for name, entry in manifest["extensions"].items():
        assert entry == {
            "module": f"protocol.records.{name}",
            "file": f"{name}{suffix}",
            "sha256": hashlib.sha256(data[COMPILED + entry["file"]]).hexdigest(),
            "cache_tag": sys.implementation.cache_tag,
            "ext_suffix": suffix,
            "platform": sysconfig.get_platform(),
        }


def test_pure_flag_and_no_compiler_build_the_zip_without_them(pyfiles_zip, tmp_path):
    pure = _build(str(tmp_path / "pure"), "--pure")
    no_cc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "scripts", "build_pyfiles_zip.py"),
            "--out-dir",
            str(tmp_path / "no-cc"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "CC": str(tmp_path / "no-such-cc")},
    )
    assert no_cc.returncode == 0, no_cc.stderr
    assert "warning: the C extensions _fastdecode, _fastencode did not compile" in no_cc.stderr
    with zipfile.ZipFile(pyfiles_zip) as zf:
        full = [n for n in zf.namelist() if not n.startswith(COMPILED)]
    for path in (pure, no_cc.stdout.strip()):
        with zipfile.ZipFile(path) as zf:
            assert zf.namelist() == full


def test_the_installed_extensions_say_so():
    from protocol.records import accel

    assert accel.origin() == "installed"


def test_compiled_paths_load_from_the_cache_and_write_and_read_as_the_pure_path(
    pyfiles_zip, tmp_path
):
    cache = tmp_path / "cache"
    report = _probe(pyfiles_zip, tmp_path, str(cache))
    assert report["origin"] == "zip cache" and report["available"], report["log"]
    manifest = _manifest(pyfiles_zip)["extensions"]
    for name, key in (("_fastdecode", "decoder"), ("_fastencode", "encoder")):
        entry = manifest[name]
        assert report[key] == str(cache / entry["sha256"] / entry["file"])
    assert report["sys_modules"] == report["decoder"]
    assert report["compiled"] == report["pure"]  # the same batch bytes, the same Arrow IPC
    assert report["log"] == []
    # Private: the cache and each extension's directory are 0o700, nothing left over.
    for directory in [cache, *(cache / e["sha256"] for e in manifest.values())]:
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    for entry in manifest.values():
        assert os.listdir(cache / entry["sha256"]) == [entry["file"]]

    # A second process uses the files already there (not written again).
    files = [cache / e["sha256"] / e["file"] for e in manifest.values()]
    before = [os.stat(f).st_mtime_ns for f in files]
    again = _probe(pyfiles_zip, tmp_path, str(cache))
    assert again["origin"] == "zip cache" and again["compiled"] == report["compiled"]
    assert [os.stat(f).st_mtime_ns for f in files] == before


def test_workers_that_start_at_once_all_load_them(pyfiles_zip, tmp_path):
    """Four children on an empty cache at the same time: each writes under a temporary
    name and renames, so none sees half a file."""
    cache = tmp_path / "cache"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = _env(str(cache), PYTHONPATH=os.pathsep.join([pyfiles_zip, SITE_PACKAGES]))
    code = "from protocol.records import accel; print(accel.origin())"
    children = [
        subprocess.Popen(
            [sys.executable, "-S", "-c", code],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [child.communicate(timeout=120) for child in children]
    assert [out.strip() for out, _ in outs] == ["zip cache"] * 4, outs
    for entry in _manifest(pyfiles_zip)["extensions"].values():
        assert os.listdir(cache / entry["sha256"]) == [entry["file"]]


def test_a_cached_file_with_another_hash_is_written_again_not_loaded(pyfiles_zip, tmp_path):
    cache = tmp_path / "cache"
    entry = _manifest(pyfiles_zip)["extensions"]["_fastdecode"]
    (cache / entry["sha256"]).mkdir(mode=0o700, parents=True)
    os.chmod(cache, 0o700)
    planted = cache / entry["sha256"] / entry["file"]
    planted.write_bytes(b"not the extension")
    report = _probe(pyfiles_zip, tmp_path, str(cache))
    assert report["origin"] == "zip cache" and report["compiled"] == report["pure"]
    assert hashlib.sha256(planted.read_bytes()).hexdigest() == entry["sha256"]


def test_a_shared_object_that_does_not_match_the_manifest_falls_back(pyfiles_zip, tmp_path):
    """One byte of the decoder flipped in a copy of the zip: nothing is extracted or
    loaded, the pure path writes and reads, and one debug line says why."""
    name = COMPILED + _manifest(pyfiles_zip)["extensions"]["_fastdecode"]["file"]

    def flip(entry, data):
        if entry != name:
            return data
        middle = len(data) // 2
        return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]

    copy = _copy(pyfiles_zip, str(tmp_path / "flipped.zip"), flip)
    cache = tmp_path / "cache"
    report = _probe(copy, tmp_path, str(cache))
    _pure_and_working(report)
    assert len(report["log"]) == 1, report["log"]
    assert "_fastdecode" in report["log"][0] and "does not match the SHA-256" in report["log"][0]
    entry = _manifest(pyfiles_zip)["extensions"]["_fastdecode"]
    assert not (cache / entry["sha256"] / entry["file"]).exists()


def test_a_zip_built_for_another_python_falls_back(pyfiles_zip, tmp_path):
    """The manifest edited as a 3.12 build would have it (suffix and cache tag): this
    Python does not take the extensions, and says so."""
    mine = sys.implementation.cache_tag  # cpython-311
    other = "cpython-312" if mine != "cpython-312" else "cpython-313"

    def as_312(entry, data):
        return data.decode().replace(mine, other).encode() if entry == MANIFEST else data

    copy = _copy(pyfiles_zip, str(tmp_path / "other.zip"), as_312)
    assert _manifest(copy) != _manifest(pyfiles_zip)
    cache = tmp_path / "cache"
    report = _probe(copy, tmp_path, str(cache))
    _pure_and_working(report)
    assert len(report["log"]) == 1 and "were built for cpython-3" in report["log"][0], report
    assert not cache.exists()


@pytest.mark.skipif(
    not OTHER_PYTHON or sys.version_info[:2] == (3, 12),
    reason="needs a Python 3.12 (pyenv's) other than this one",
)
def test_another_python_refuses_this_zip_s_extensions(pyfiles_zip, tmp_path):
    """Python 3.12 (which has no numpy or pyarrow here, so it runs ``zip_extensions``
    alone, from the zip) refuses the extensions this Python built, before writing
    anything."""
    code = textwrap.dedent("""
        import logging, os, sys, zipimport
        logging.basicConfig(level=logging.DEBUG, format="%(name)s %(message)s")
        importer = zipimport.zipimporter(os.path.join(sys.argv[1], "protocol", "records"))
        spec = importer.find_spec("zip_extensions")
        module = type(sys)("zip_extensions")
        module.__spec__, module.__file__ = spec, spec.origin
        spec.loader.exec_module(module)
        accel_file = os.path.join(sys.argv[1], "protocol", "records", "accel.py")
        print(module.load("protocol.records", accel_file, importer))
    """)
    cache = tmp_path / "cache"
    done = subprocess.run(
        [OTHER_PYTHON, "-S", "-c", code, pyfiles_zip],
        cwd=tmp_path,
        env=_env(str(cache)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
    assert "pykafka.protocol.records pyspark-pykafka: pure-Python" in done.stderr
    assert (
        f"were built for {sys.implementation.cache_tag}" in done.stderr
        and "this Python is cpython-312" in done.stderr
    ), done.stderr
    assert not cache.exists()


@pytest.mark.parametrize("how", ["group-writable", "other-writable", "another owner", "a symlink"])
def test_a_cache_directory_that_is_not_private_is_refused(pyfiles_zip, tmp_path, how):
    cache = tmp_path / "cache"
    if how == "a symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        cache.symlink_to(tmp_path / "elsewhere")
    else:
        cache.mkdir()
        os.chmod(cache, {"group-writable": 0o770, "other-writable": 0o707}.get(how, 0o700))
    if how == "another owner":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another uid needs root")
        os.chown(cache, 4242, 4242)
    report = _probe(pyfiles_zip, tmp_path, str(cache))
    _pure_and_working(report)
    assert len(report["log"]) == 1, report["log"]
    reason = {
        "group-writable": "is writable by group or others",
        "other-writable": "is writable by group or others",
        "another owner": "is owned by uid 4242",
        "a symlink": "is not a directory",
    }[how]
    assert reason in report["log"][0], report["log"]
    assert os.listdir(cache) == []


def test_the_cache_directory_defaults(pyfiles_zip, tmp_path):
    """``$XDG_CACHE_HOME/pyspark-pykafka``; ``~/.cache/pyspark-pykafka``; with a home
    that cannot be written, ``<tempdir>/pyspark-pykafka-<uid>``."""
    decoder = _manifest(pyfiles_zip)["extensions"]["_fastdecode"]
    where = f"{decoder['sha256']}/{decoder['file']}"
    xdg = tmp_path / "xdg"
    report = _probe(pyfiles_zip, tmp_path, None, XDG_CACHE_HOME=str(xdg))
    assert report["decoder"] == str(xdg / "pyspark-pykafka" / where)
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CACHE_HOME": ""}
    report = _probe(pyfiles_zip, tmp_path, None, **env)
    assert report["decoder"] == str(home / ".cache" / "pyspark-pykafka" / where)
    temp = tmp_path / "temp"
    temp.mkdir()
    report = _probe(
        pyfiles_zip, tmp_path, None, HOME="/proc/no-such-home", XDG_CACHE_HOME="", TMPDIR=str(temp)
    )
    assert report["decoder"] == str(temp / f"pyspark-pykafka-{os.getuid()}" / where)
    assert report["origin"] == "zip cache" and report["log"] == []


def test_pure_python_switch_extracts_nothing(pyfiles_zip, tmp_path):
    cache = tmp_path / "cache"
    report = _probe(pyfiles_zip, tmp_path, str(cache), PYKAFKA_PURE_PYTHON="1")
    _pure_and_working(report)
    assert report["log"] == [] and not cache.exists()


def test_an_unwritable_cache_falls_back(pyfiles_zip, tmp_path):
    report = _probe(pyfiles_zip, tmp_path, "/proc/no-such-cache")
    _pure_and_working(report)
    assert len(report["log"]) == 1 and "no cache directory can be created" in report["log"][0]
