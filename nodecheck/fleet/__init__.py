"""Scheduled sweeps and their history."""
