"""OAUTHBEARER token sources for the connection's SASL layer (outside the sans-IO core).

``options.oauthbearer_factory`` reads the Java client's options into the
``ClientConfig.sasl_mechanism_factory`` a connection calls for each authentication;
``sources`` fetch tokens, ``tokens`` caches and refreshes them per process.
"""
