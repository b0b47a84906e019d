"""Repair: what to do about a node the gate found unfit (docs/remediation.md)."""
