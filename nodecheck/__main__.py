"""`python -m nodecheck` is the `nodecheck` command."""

from nodecheck.cli import entry

entry()
