"""HTML pages of reports: one self-contained file each (report.html of a run, fleet.html of the
sweeps). Jinja2 templates with autoescaping always on: node names, messages and captures are
hostile text and render as text. Charts are inline SVG made from the data here; nothing is fetched:
no script, style, font or image from anywhere else, and the page's Content-Security-Policy says so
to the browser too."""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

# what a page may load: nothing from anywhere (its own inline style and script only; images only as
# data: URIs). A capture link is a navigation, which this does not govern.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)


@cache
def environment() -> Environment:
    """The one Jinja2 environment: autoescaping for every template (not only *.html: a template
    named otherwise must not slip through), undefined names an error, not an empty string."""
    return Environment(
        loader=PackageLoader("nodecheck.report.html", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(template: str, **context: Any) -> str:
    """A template of nodecheck/report/html/templates, rendered with `context` (and the CSP)."""
    return environment().get_template(template).render(csp=CONTENT_SECURITY_POLICY, **context)
