"""Defaults and bounds the commands share with their arguments (cli) and each other.

Plain numbers, no imports: `nodecheck --help` reads them and must start fast (no pydantic).
MAX_DEADLINE_S equals nodecheck.config.playbook.MAX_DEADLINE_S (a test holds them together)."""

from __future__ import annotations

# Bounds on numeric arguments: a typo (1e10, inf) is bad input, not an OverflowError mid-run.
MAX_DEADLINE_S = 86_400.0  # a day: far beyond any pre-job check
MAX_CONNECT_TIMEOUT_S = 600.0  # an SSH handshake slower than 10 minutes is a dead node
DEFAULT_FANOUT = 64  # as clush: enough for speed, gentle on sshd MaxStartups
MAX_FANOUT = 4096  # each node in flight holds a thread and an SSH connection
