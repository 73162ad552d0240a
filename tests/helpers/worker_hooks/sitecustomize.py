"""On the ``PYTHONPATH`` of the drivers tests start (``tests.helpers.kill_points.child_env``),
so that Python runs it at start-up in the driver and in every Python worker of its JVM:
installs the kill and fail points when the test asked for one."""

import os

if os.environ.get("PYKAFKA_TEST_KILL_AT") or os.environ.get("PYKAFKA_TEST_FAIL_AT"):
    from tests.helpers import kill_points

    kill_points.install()
