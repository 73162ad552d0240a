"""The IO half of the protocol: connections (the only sockets), the cluster client,
the per-worker pool, admin calls, transactions, group offsets, TLS contexts and the
retry policy. Everything it sends and reads is encoded and decoded by the sans-IO
modules of ``protocol``."""
