"""The checks reference is generated from the registry: docs/checks.md must be what the registry
renders today, and `nodecheck checks` prints the text form."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from nodecheck.app.checks_reference import REGENERATE, render
from nodecheck.checks import all_checks
from nodecheck.cli import main
from nodecheck.core.model import Probe
from nodecheck.core.registry import CheckSpec

DOC = Path(__file__).resolve().parents[2] / "docs" / "checks.md"


def test_docs_checks_md_is_what_the_registry_renders():
    rendered = render(all_checks(), "markdown")
    written = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    assert written == rendered, f"docs/checks.md is stale: regenerate it with `{REGENERATE}`"


def test_nodecheck_checks_prints_the_text_reference(capsys):
    assert main(["checks"]) == 0
    assert capsys.readouterr().out == render(all_checks(), "text")


def test_nodecheck_checks_format_markdown_prints_the_page_docs_checks_md_holds(capsys):
    assert main(["checks", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out == render(all_checks(), "markdown")
    assert out.startswith("# ") and "## ib.pairs" in out and "## gpu.health" in out


def test_every_check_has_its_section_in_name_order():
    page = render(all_checks(), "markdown")
    headings = [line[3:] for line in page.splitlines() if line.startswith("## ") and line != "## Parameter types"]
    assert headings == sorted(all_checks())
    assert render(all_checks(), "markdown") == page


class Band(BaseModel):
    """A band for the test."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    fail_above: float = 0


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    count: int = Field(..., ge=0, strict=True, description="how many | of them")
    band: Band = Field(Band(), description="a nested band")
    names: list[str] = Field(default_factory=list)


def judge(out, want):
    """One line that says what it judges.

    A second paragraph, kept as written."""
    return iter(())


def test_a_check_page_gives_docstring_probes_parameters_and_source():
    spec = CheckSpec("demo.judge", judge, (Probe("echo", ("echo", "hi"), timeout_s=5),), Params)
    page = render({"demo.judge": spec}, "markdown")
    assert "| [`demo.judge`](#demojudge) | node | One line that says what it judges. |" in page
    assert "## demo.judge\n\nScope: **node**. Source: `tests/app/test_checks_reference.py`, function `judge`." in page
    assert "One line that says what it judges.\n\nA second paragraph, kept as written." in page
    assert "- `echo`: `echo hi` (timeout 5 s)" in page
    assert "| `count` | integer | required | strict type, >= 0 | how many \\| of them |" in page
    assert "| `band` | Band | `Band(fail_above=0)` |  | a nested band |" in page
    assert "| `names` | list of text | `[]` |  |  |" in page
    assert "### Band\n\nA band for the test.\n\n| Name |" in page


def test_a_long_script_argument_is_shown_by_its_size():
    script = "echo a\necho b\necho c\n"
    spec = CheckSpec("demo.judge", judge, (Probe("s", ("sh", "-c", script, "tag")),), Params)
    assert "- `s`: `sh -c <script, 3 lines> tag` (timeout 30 s)" in render({"demo.judge": spec}, "markdown")


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="format must be one of text, markdown"):
        render(all_checks(), "html")
