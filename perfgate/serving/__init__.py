"""Serving: one server process (launch, readiness, teardown, logs), the host's GPUs and processes,
attaching to a running server, what a server's log proves it exercised.
"""
