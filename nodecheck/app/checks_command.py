"""`nodecheck checks`: every check with its description and parameters, as text, as the markdown
reference (docs/checks.md is `nodecheck checks --format markdown`) or as JSON; and `nodecheck
explain CHECK`: one check's page, from the same reference."""

from __future__ import annotations

import difflib

from nodecheck.core.errors import ConfigError


def list_checks(fmt: str = "text") -> str:
    from nodecheck.app.checks_reference import render
    from nodecheck.checks import all_checks

    return render(all_checks(), fmt)


def explain_check(name: str) -> str:
    """The page `nodecheck explain NAME` prints; ConfigError (exit 64) for a name no check has."""
    from nodecheck.app.checks_reference import explain, reference
    from nodecheck.checks import all_checks

    checks = all_checks()
    spec = checks.get(name)
    if spec is None:
        raise ConfigError(unknown_check(name, list(checks)))
    return explain(reference(spec))


def unknown_check(name: str, known: list[str]) -> str:
    """ "unknown check X; did you mean Y? (`nodecheck checks` lists them)", the guess left out when
    nothing is close. A name with control characters is shown as repr (it came from the command line)."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    guess = f"; did you mean {close[0]}?" if close else ""
    shown = name if name.isprintable() else repr(name)
    return f"unknown check {shown}{guess} (`nodecheck checks` lists them)"
