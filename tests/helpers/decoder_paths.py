"""Run a test module's tests on both record decoders and encoders: the pure-Python path
and the compiled one (protocol/records/accel.py), when it is built. Import ``decoder_path`` into
a test module; it is autouse and module-scoped, so every test runs once per path (ids end
in ``[pure]`` / ``[compiled]``) and hypothesis sees no function-scoped fixture.

Whether the extension is built at all is asserted once, by
``tests/test_records_accel.py``."""

from __future__ import annotations

import pytest

from protocol.records import accel

PATHS = ["pure", "compiled"] if accel.available() else ["pure"]


@pytest.fixture(scope="module", autouse=True, params=PATHS)
def decoder_path(request):
    with accel.forced(request.param == "compiled"):
        yield request.param
