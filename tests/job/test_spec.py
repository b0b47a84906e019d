"""JOB.yml loading (file:line errors, did-you-mean, relative paths), the counts I/O and the job probe."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nodecheck.core.errors import ConfigError, ParseError
from nodecheck.job.counts import read_counts
from nodecheck.job.probe import job_probe, parse_job_probe
from nodecheck.job.spec import base_dir, load_job_spec
from tests import everyone_tmp

tmp_path = everyone_tmp.tmp_path  # files a job's user reads: in a directory everyone may enter

ISSUE_SHAPE = """world_size: 16
gpus_per_node: 8
env: {NCCL_SOCKET_IFNAME: ib0, TORCH_NCCL_ASYNC_ERROR_HANDLING: "1", TORCH_NCCL_TRACE_BUFFER_SIZE: "2000"}
checkpoint: {dir: /shared/ckpt, every_steps: 500}
data_balance: {counts_file: counts.json, per_step: 1}   # counts.json: {"0": 30871, "1": 30850, ...}
"""


def write(tmp_path, text, name="job.yml"):
    (tmp_path / name).write_text(text)
    return tmp_path / name


def test_the_issues_shape_loads_unchanged(tmp_path):
    spec = load_job_spec(write(tmp_path, ISSUE_SHAPE))
    assert (spec.world_size, spec.gpus_per_node, spec.nodes_needed) == (16, 8, 2)
    assert spec.env == {
        "NCCL_SOCKET_IFNAME": "ib0",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
    }
    assert (spec.checkpoint.dir, spec.checkpoint.every_steps, spec.checkpoint.resume) == ("/shared/ckpt", 500, False)
    assert spec.data_balance.counts_file == str(tmp_path / "counts.json")  # relative to JOB.yml
    assert (spec.data_balance.per_step, spec.data_balance.grad_accum, spec.data_balance.items_per_step) == (1, 1, 1)
    assert (spec.timeouts.collective_s, spec.limits.timeout_max_s, spec.launcher.kind) == (None, 3600.0, "other")
    assert spec.source == str(tmp_path / "job.yml") and len(spec.sha256) == 64


def test_watch_block_is_accepted_as_is_and_paths_resolve(tmp_path):
    spec = load_job_spec(
        write(
            tmp_path,
            "world_size: 8\ngpus_per_node: 8\nwatch: {interval_s: 5, anything: [1]}\n"
            "checkpoint: {dir: ckpt, every_minutes: 20, resume: true, resume_from: ckpt/s5}\n",
        )
    )
    assert spec.watch == {"interval_s": 5, "anything": [1]}
    assert (spec.checkpoint.dir, spec.checkpoint.resume_from) == (str(tmp_path / "ckpt"), str(tmp_path / "ckpt/s5"))


@pytest.mark.parametrize(
    "text, where, message",
    [
        (
            "world_size: 16\ngpus_per_node: 8\ncheckpoint:\n  dir: /c\n  evry_steps: 5\n",
            5,
            "unknown key 'checkpoint.evry_steps'; hint: did you mean 'every_steps'?",
        ),
        (
            "world_size: 16\ngpus_per_node: 8\ndata_balance:\n  per_step: 2\n",
            3,
            "data_balance: Value error, give exactly one of counts_file or counts_command",
        ),
        ("world_size: 16\n", 1, "missing required key 'gpus_per_node'; hint: add gpus_per_node: <value>"),
        ("world_size: sixteen\ngpus_per_node: 8\n", 1, "world_size: Input should be a valid integer, got 'sixteen'"),
        (
            "world_size: 16\ngpus_per_node: 8\nenv: {TORCH_NCCL_DUMP_ON_TIMEOUT: yes}\n",
            3,
            "env.TORCH_NCCL_DUMP_ON_TIMEOUT: Value error, a YAML boolean is not an environment value",
        ),
        (
            "world_size: 16\ngpus_per_node: 8\ncheckpoint: {dir: /c, resume_from: /c/x}\n",
            3,
            "checkpoint.resume_from is set but checkpoint.resume is false; hint: set resume: true, or drop resume_from",
        ),
        ("world_size: 16\ngpus_per_node: 8\nlauncher: {kind: mpirun}\n", 3, "launcher.kind: Input should be"),
        ("- 1\n", 1, "a job description is a mapping with world_size: and gpus_per_node:"),
        ("world_size: 16\ngpus_per_node: 8\nsource: x\n", 3, "unknown key 'source'"),
    ],
)
def test_errors_name_file_line_and_fix(tmp_path, text, where, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_job_spec(path)
    assert str(e.value).startswith(f"{path}:{where}: {message}")


def _balance(tmp_path, block: str):
    return load_job_spec(write(tmp_path, f"world_size: 2\ngpus_per_node: 1\ndata_balance: {block}\n")).data_balance


def test_counts_from_a_file_and_from_a_command(tmp_path):
    (tmp_path / "c.csv").write_text("rank,count\n0,5\n1,6\n")
    got = read_counts(_balance(tmp_path, "{counts_file: c.csv}"), tmp_path, user="")
    assert (got.counts, got.source) == ({0: 5, 1: 6}, "c.csv")
    argv = f"[{sys.executable}, -c, 'print([7, 8])']"
    got = read_counts(_balance(tmp_path, f"{{counts_command: {argv}}}"), tmp_path, user="")
    assert got.counts == {0: 7, 1: 8}
    assert got.source.startswith("command: ") and got.source.endswith("-c 'print([7, 8])'")


@pytest.mark.parametrize(
    "block, prefix",
    [
        ("{counts_file: nope.json}", "{tmp}/nope.json: cannot read the rank counts: No such file or directory"),
        ("{counts_file: bad.json}", "{tmp}/bad.json: cannot read the rank counts: rank 1: count -1 is negative"),
        ("{counts_command: 'false'}", "data_balance.counts_command: false exited 1: (no output)"),
        ("{counts_command: [/no/such/tool]}", "data_balance.counts_command: cannot run /no/such/tool: No such file"),
        (
            "{counts_command: 'sleep 5', command_timeout_s: 0.2}",
            "data_balance.counts_command: sleep 5 printed no counts within 0.2 s; killed",
        ),
        (
            "{counts_command: 'echo oops'}",
            "data_balance.counts_command (echo oops): cannot read the rank counts: line 1",
        ),
    ],
)
def test_counts_errors_name_the_file_or_command(tmp_path, block, prefix):
    (tmp_path / "bad.json").write_text("[1, -1]")
    with pytest.raises(ConfigError) as e:
        read_counts(_balance(tmp_path, block), tmp_path, user="")
    assert str(e.value).startswith(prefix.format(tmp=tmp_path))


def test_probe_runs_here_filters_env_and_leaves_no_file(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "step-100").write_text("x")
    spec = load_job_spec(
        write(
            tmp_path,
            "world_size: 8\ngpus_per_node: 8\nenv: {TORCH_FR_DUMP_TEMP_FILE: "
            f"{tmp_path}/fr/trace_}}\ncheckpoint: {{dir: ckpt, every_minutes: 10, "
            "resume: true}\n",
        )
    )
    probe = job_probe(spec)
    assert probe.argv[3:] == (
        "nodecheck-job",
        "",
        str(ckpt),
        "",
        "",
        "job:TORCH_FR_DUMP_TEMP_FILE",
        f"{tmp_path}/fr/trace_",
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "NCCL_IB_HCA": "mlx5_0",
        "CUDA_MODULE_LOADING": "LAZY",
        "AWS_SECRET_ACCESS_KEY": "hunter2",
    }
    out = subprocess.run(probe.argv, capture_output=True, text=True, env=env, timeout=30).stdout
    assert "hunter2" not in out
    facts = parse_job_probe(out)
    assert facts.node_env == {"NCCL_IB_HCA": "mlx5_0", "CUDA_MODULE_LOADING": "LAZY"}
    assert facts.writable["checkpoint"] == "ok" and facts.writable["default"] == "ok"
    assert facts.writable["job:TORCH_FR_DUMP_TEMP_FILE"].startswith("!mktemp: ")  # fr/ does not exist
    assert (facts.ckpt_exists, facts.resume) == (True, "entry step-100")
    assert facts.ckpt_free_bytes > 0 and " on " in facts.ckpt_filesystem
    assert sorted(p.name for p in ckpt.iterdir()) == ["step-100"]  # mktemp + rm: nothing left
    assert facts.conf[0].path == f"{tmp_path}/.nccl.conf"


# --- review: input a gate must refuse, output a probe must not trust ---------------------------------


@pytest.mark.parametrize(
    "text, where, message",
    [
        (
            "world_size: 12\ngpus_per_node: 8\n",
            1,
            "world_size 12 is not a multiple of gpus_per_node 8: every node runs gpus_per_node ranks; "
            "hint: world_size: 16 "
            "(2 nodes) or 8 (1 node), or the gpus_per_node that divides it",
        ),
        (
            "world_size: 16\ngpus_per_node: 8\ntimeouts: {collective_s: true}\n",
            3,
            "timeouts.collective_s: Input should be a valid number",
        ),
        (
            "world_size: 16\ngpus_per_node: 8\ncheckpoint: {dir: /c, min_free_gb: '50'}\n",
            3,
            "checkpoint.min_free_gb: Input should be a valid number",
        ),
    ],
)
def test_review_errors_name_file_line_and_fix(tmp_path, text, where, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_job_spec(path)
    assert str(e.value).startswith(f"{path}:{where}: {message}")


def test_counts_command_output_is_bounded_and_its_stderr_is_reported(tmp_path, monkeypatch):
    import nodecheck.job.counts as counts

    monkeypatch.setattr(counts, "MAX_COUNTS_BYTES", 1000)
    flood = f'[{sys.executable}, -c, \'import sys; sys.stdout.write("1," * 10**7); sys.stderr.write("x" * 10**6)\']'
    with pytest.raises(ConfigError) as e:
        read_counts(_balance(tmp_path, f"{{counts_command: {flood}}}"), tmp_path, user="")
    assert "printed more than 1,000 bytes; killed" in str(e.value)
    quiet = f"[{sys.executable}, -c, 'import sys; sys.stderr.write(\"no such split: train\\\\n\")']"
    with pytest.raises(ConfigError) as e:
        read_counts(_balance(tmp_path, f"{{counts_command: {quiet}}}"), tmp_path, user="")
    assert str(e.value).startswith("data_balance.counts_command (")
    assert "cannot read the rank counts: empty: no rank counts; its stderr: no such split: train" in str(e.value)


def test_counts_file_with_a_byte_order_mark(tmp_path):
    (tmp_path / "c.csv").write_text("\ufeff0,5\n1,6\n", encoding="utf-8")
    (tmp_path / "c.json").write_text('\ufeff{"0": 5, "1": 6}', encoding="utf-8")
    assert read_counts(_balance(tmp_path, "{counts_file: c.csv}"), tmp_path, user="").counts == {0: 5, 1: 6}
    assert read_counts(_balance(tmp_path, "{counts_file: c.json}"), tmp_path, user="").counts == {0: 5, 1: 6}


HOSTILE = ["a b", "$(touch PWNED)", "`touch PWNED`", 'it\'s "q"', "-n", "back\\c slash", "new\nline", "--"]


@pytest.mark.parametrize("name", HOSTILE)
def test_probe_with_hostile_paths_runs_for_real(tmp_path, name):
    ckpt = tmp_path / name
    ckpt.mkdir()
    (ckpt / "step 1").write_text("x")
    spec = load_job_spec(
        write(
            tmp_path,
            "world_size: 8\ngpus_per_node: 8\ncheckpoint: {dir: CK, every_minutes: 5, resume: true}\n".replace(
                "CK", json_str(str(ckpt))
            ),
        )
    )
    spec = spec.model_copy(update={"env": {"TORCH_FR_DUMP_TEMP_FILE": f"{ckpt}/fr_", "NCCL_CONF_FILE": f"{ckpt}.conf"}})
    (tmp_path / f"{name}.conf").write_text("NCCL_IB_HCA=mlx5_0\n")
    out = subprocess.run(
        job_probe(spec).argv,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    ).stdout
    facts = parse_job_probe(out)
    assert facts.writable == {"default": "ok", "job:TORCH_FR_DUMP_TEMP_FILE": "ok", "checkpoint": "ok"}
    assert (facts.ckpt_exists, facts.resume, facts.conf[0].path) == (True, "entry step 1", f"{ckpt}.conf")
    assert facts.conf[0].settings == {"NCCL_IB_HCA": "mlx5_0"} and facts.ckpt_free_bytes > 0
    assert [p.name for p in ckpt.iterdir()] == ["step 1"]  # mktemp + rm left nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["job.yml", name, f"{name}.conf"])  # ran nothing


def json_str(s: str) -> str:
    import json

    return json.dumps(s)


def test_probe_env_values_arrive_whole_and_other_variables_never_leave(tmp_path):
    spec = load_job_spec(write(tmp_path, "world_size: 8\ngpus_per_node: 8\n"))
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "NCCL_ALGO": "Ring\nNCCL_FAKE=1",
        "CUDA_X": "a b \\ 'q' \"d\" @@nodecheck end node_env rc=0 é",
        "SECRET_TOKEN": "s3cr3t\nTORCH_LEAK=hunter2\n@@nodecheck ckpt_exists 1",
    }
    out = subprocess.run(job_probe(spec).argv, capture_output=True, text=True, env=env, timeout=30).stdout
    assert "hunter2" not in out and "s3cr3t" not in out
    facts = parse_job_probe(out)
    assert facts.node_env == {"NCCL_ALGO": "Ring\nNCCL_FAKE=1", "CUDA_X": env["CUDA_X"]}
    assert facts.ckpt_exists is None


def test_probe_resume_point_ignores_lost_found_and_hidden_entries_and_a_file_is_not_a_dir(tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / "lost+found").mkdir(parents=True)
    (ckpt / ".snapshot").mkdir()
    spec = load_job_spec(
        write(tmp_path, "world_size: 8\ngpus_per_node: 8\ncheckpoint: {dir: ckpt, every_minutes: 5, resume: true}\n")
    )

    def run():
        return parse_job_probe(
            subprocess.run(
                job_probe(spec).argv,
                capture_output=True,
                text=True,
                timeout=30,
                env={"PATH": "/usr/bin:/bin"},
            ).stdout
        )

    facts = run()
    assert (facts.ckpt_exists, facts.resume) == (True, "missing")
    assert facts.ckpt_fstype  # stat -f: "ext2/ext3", "tmpfs", "overlayfs", ...
    for p in ckpt.iterdir():
        p.rmdir()
    ckpt.rmdir()
    ckpt.write_text("not a directory")
    facts = run()
    assert (facts.ckpt_exists, facts.ckpt_not_dir, facts.resume) == (False, True, "missing")


def test_the_example_loads():
    spec = load_job_spec("examples/job.yml")
    assert (spec.world_size, spec.limits.timeout_min_s, spec.checkpoint.min_free_gb, spec.data_balance.per_step) == (
        16,
        60.0,
        500.0,
        8,
    )
    # its counts.json lies beside it: every rank runs 3,856 steps (30,848-30,855 blocks, 8 a step)
    counts = read_counts(spec.data_balance, base_dir(spec), user="")
    assert (len(counts.counts), min(counts.counts.values()), max(counts.counts.values()), counts.source) == (
        16,
        30848,
        30855,
        "counts.json",
    )
    assert {c // spec.data_balance.items_per_step for c in counts.counts.values()} == {3856}


def test_probe_without_awk_is_unreadable_not_an_empty_environment(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "cat", "mktemp", "rm", "head", "df", "stat"):  # everything the probe uses but awk
        (bin_dir / tool).symlink_to(
            subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        )
    spec = load_job_spec(write(tmp_path, "world_size: 8\ngpus_per_node: 8\n"))
    out = subprocess.run(
        job_probe(spec).argv,
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": str(bin_dir), "NCCL_IB_HCA": "mlx5_0"},
    ).stdout
    with pytest.raises(ParseError, match=r"reading the node's environment failed \(exit 127\): .*awk"):
        parse_job_probe(out)


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        (
            "world_size: 8\ngpus_per_node: 8\ncheckpoint: {dir: /c, save_s: .nan}\n",
            3,
            "checkpoint.save_s: Input should be a finite number",
        ),
        (
            "world_size: 8\ngpus_per_node: 8\nlimits:\n  timeout_max_s: .inf\n",
            4,
            "limits.timeout_max_s: Input should be a finite number",
        ),
    ],
)
def test_a_non_finite_number_is_refused_at_its_line_with_a_hint(tmp_path, text, line, fragment):
    # issue 17: NaN compares false with everything; no setting may be nan or inf
    with pytest.raises(ConfigError) as caught:
        load_job_spec(write(tmp_path, text))
    assert caught.value.line == line and fragment in caught.value.message
    assert "nan and inf" in caught.value.hint


def test_the_watch_block_bound_from_an_aliased_save_s_is_quoted_bounded(tmp_path):
    from nodecheck.watch.config import load_watch_config

    aliased = (
        "[&a [x, x, x, x, x, x, x, x], "
        + ", ".join(f"&{n} [{', '.join([f'*{p}'] * 8)}]" for p, n in zip("abcdef", "bcdefg"))
        + "]"
    )
    path = write(
        tmp_path, f"world_size: 8\ngpus_per_node: 8\ncheckpoint: {{dir: /c, save_s: {aliased}}}\nwatch: {{}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_watch_config(str(path))
    assert len(str(caught.value)) < 1000 and "checkpoint.save_s must be a positive number" in caught.value.message
