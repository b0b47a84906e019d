"""Data a page's inline script draws from, embedded safely: JSON inside
<script type="application/json">, where "</script>" or "<!--" in a node name must not end or
change the element. Shared by the run and fleet pages."""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup, escape


def script_json(value: Any) -> str:
    """JSON text safe inside a <script> element: <, > and & as \\u escapes (JSON.parse reads them
    back as the same characters), and the line separators JavaScript once treated as newlines."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def json_script(element_id: str, value: Any) -> Markup:
    """<script type="application/json" id="..."> holding `value`; read it with
    JSON.parse(document.getElementById(id).textContent)."""
    return Markup(f'<script type="application/json" id="{escape(element_id)}">{script_json(value)}</script>')
