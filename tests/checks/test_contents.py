"""The checks' table of contents (nodecheck.checks.CONTENTS) against what the modules register, and
a playbook that loads only the modules of the checks it names (issue 34, 7: the node Prolog's
start-up)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import nodecheck.checks
from nodecheck.checks import CONTENTS, all_checks
from tests.helpers import DATA

ROOT = DATA.parents[1]


def test_the_table_names_every_registered_check_and_the_module_that_registers_it():
    registered = all_checks()
    assert list(registered) == list(CONTENTS)
    assert {name: spec.judge.__module__ for name, spec in registered.items()} == {
        name: f"nodecheck.checks.{module}" for name, module in CONTENTS.items()
    }


def test_every_module_that_registers_a_check_is_in_the_table():
    all_checks()
    registering = {spec.judge.__module__.rsplit(".", 1)[1] for spec in all_checks().values()}
    modules = {m.name for m in pkgutil.iter_modules(nodecheck.checks.__path__)}
    assert registering <= modules and registering == set(CONTENTS.values())


def loaded_after(code: str) -> list[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code + "\nimport json, sys\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('nodecheck.checks.'))))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_the_prolog_playbook_loads_only_the_modules_of_its_checks():
    loaded = loaded_after("from nodecheck.config.playbook import load_playbook\nload_playbook('playbooks/prolog.yml')")
    assert "nodecheck.checks.proc" in loaded and "nodecheck.checks.gpu" in loaded
    for heavy in ("nccl_allreduce", "nccl_env", "gpu_perf", "gpu_sdc", "ib_pairs", "roce", "command"):
        assert f"nodecheck.checks.{heavy}" not in loaded


def test_an_unknown_check_still_gets_the_nearest_name_of_every_check(tmp_path):
    book = tmp_path / "book.yml"
    book.write_text("version: 1\nchecks:\n  nccl.allreduce_singel: {}\n")
    done = subprocess.run(
        [sys.executable, "-m", "nodecheck", "run", "--local", "--playbook", str(book)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 64, done.stderr
    assert "did you mean 'nccl.allreduce_single'?" in done.stderr


def test_facts_in_a_fresh_process_gathers_every_value_check_in_the_tables_order():
    # red before value_checks(): `nodecheck facts` imported three check modules and gathered only
    # their values (no nccl.version, ofed.version, hca.firmware: tests/integration/test_gpu_fleet.py)
    code = (
        "from nodecheck.run import facts\n"
        "from nodecheck.checks.values import value_checks\n"
        "import json\nprint(json.dumps(list(value_checks())))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    names = json.loads(done.stdout.splitlines()[-1])
    expected = [n for n in CONTENTS if n in {"nccl.version", "ofed.version", "hca.firmware", "container.digest"}]
    assert [n for n in names if n in expected] == expected
    assert names == [n for n in CONTENTS if n in names]


def test_a_typo_under_a_checks_name_still_gets_the_nearest_of_every_check():
    # `limits.x` is not a template's label: every module is loaded for the "did you mean"
    loaded = loaded_after("from nodecheck.checks import checks_named\nchecks_named(['limits.x'])")
    assert "nodecheck.checks.nccl_allreduce" in loaded
    loaded = loaded_after("from nodecheck.checks import checks_named\nchecks_named(['command.nfs_home'])")
    assert "nodecheck.checks.command" in loaded and "nodecheck.checks.roce" not in loaded
