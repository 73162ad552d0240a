"""On the ``PYTHONPATH`` of the drivers tests start (``tests.helpers.kill_points.child_env``),
so that Python runs it at start-up in the driver and in every Python worker of its JVM:
installs the kill and fail points when the test asked for one."""

import os

if any(
    os.environ.get(name)
    for name in ("PYKAFKA_TEST_KILL_AT", "PYKAFKA_TEST_FAIL_AT", "PYKAFKA_TEST_KILL_EXECUTOR_AT")
):
    from tests.helpers import kill_points

    kill_points.install()
