"""What the tests share: broker set-ups, fault proxies, stand-in brokers, waiting, the
exactly-once kill points. Test modules import from here, never from each other
(tests/test_test_layout.py checks)."""
