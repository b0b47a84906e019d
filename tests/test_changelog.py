"""CHANGELOG.md leads with the version nodecheck reports: an operator upgrading a root tool on
thousands of nodes reads what changed and what to do for exactly the version they install."""

import re
from pathlib import Path

import tomllib

from nodecheck import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_the_changelog_leads_with_the_version_the_package_and_the_code_report():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## (\d+\.\d+\.\d+)\b", text, re.MULTILINE)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert versions, "CHANGELOG.md has no '## X.Y.Z' release heading"
    assert versions[0] == __version__ == project
    assert len(versions) == len(set(versions)), "a version is listed twice"


def test_every_release_says_what_to_do_on_upgrade_when_it_refuses_earlier_input():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.split(r"^## ", text, flags=re.MULTILINE)[1]
    assert "### Upgrade" in first and "<!--" not in first, "the newest release's notes are unfinished"
