"""The checks nodecheck knows; importing this package registers them (this list is the table of contents)."""
from nodecheck.checks import ib  # noqa: F401
