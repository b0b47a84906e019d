"""`nodecheck checks`: every check with its description and parameters, as text or as the markdown
reference (docs/checks.md is `nodecheck checks --format markdown`)."""

from __future__ import annotations


def list_checks(fmt: str = "text") -> str:
    from nodecheck.app.checks_reference import render
    from nodecheck.checks import all_checks

    return render(all_checks(), fmt)
