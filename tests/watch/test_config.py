"""load_watch_config / apply_overrides: defaults, JOB.yml's watch block, file:line errors with the fix."""

from __future__ import annotations

import re

import pytest

from nodecheck.core.errors import ConfigError
from nodecheck.watch.config import DEFAULT_STEP_REGEX, ProgressSource, WatchConfig, apply_overrides, load_watch_config


def write(tmp_path, text: str, name: str = "watch.yml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_defaults():
    cfg = load_watch_config(None)
    assert cfg == WatchConfig()
    assert (cfg.interval_s, cfg.history, cfg.match, cfg.on_hang) == (30, 240, None, None)
    b = cfg.bounds
    assert (b.hang_after_s, b.checkpoint_max_s, b.startup_grace_s, b.unresponsive_after_s, b.slow_for_s) == (
        600,
        900,
        900,
        90,
        300,
    )
    assert (
        b.throughput_floor,
        b.straggler_pct,
        b.busy_util_pct,
        b.idle_util_pct,
        b.low_power_fraction,
        b.low_power_w,
    ) == (None, 15.0, 90, 5, 0.35, None)
    assert (cfg.alerts.retries, cfg.alerts.timeout_s, cfg.alerts.backoff_s) == (3, 10, 1.0)
    assert cfg.sample_timeout == 20.0
    assert cfg.progress.step_regex == DEFAULT_STEP_REGEX


def test_full_file(tmp_path):
    cfg = load_watch_config(
        write(
            tmp_path,
            """\
match: 'train\\.py'
interval_s: 10
gpus_per_node: 8
progress:
  log: /scratch/{node}/train.log
  rank_time_regex: 'rank (?P<rank>\\d+) time (?P<seconds>[\\d.]+)s'
bounds: {hang_after_s: 300, checkpoint_max_s: 120, throughput_floor: 4000, low_power_w: 200}
alerts: {command: "/usr/local/bin/page --team 'ml infra'", url: https://hooks.example/nodecheck}
on_hang: requeue
""",
        )
    )
    assert cfg.match == r"train\.py" and cfg.interval_s == 10 and cfg.gpus_per_node == 8
    assert cfg.progress.for_node("gpu017") == ("/scratch/gpu017/train.log", None)
    assert cfg.progress.compiled("rank_time_regex").groupindex.keys() == {"rank", "seconds"}
    # checkpoint_max_s below hang_after_s is allowed (a save-shaped freeze is judged sooner)
    assert (cfg.bounds.hang_after_s, cfg.bounds.checkpoint_max_s) == (300, 120)
    assert cfg.alerts.argv == ("/usr/local/bin/page", "--team", "ml infra")
    assert cfg.on_hang == "requeue"
    assert cfg.sample_timeout == 10  # never longer than the interval


def test_job_yml_watch_block_and_derived_checkpoint_bound(tmp_path):
    job = """\
world_size: 16
gpus_per_node: 8
checkpoint: {dir: /shared/ckpt, every_steps: 500, save_s: 400}
watch:
  match: train\\.py
  progress:
    heartbeat: /shared/hb/{node}
"""
    cfg = load_watch_config(write(tmp_path, job, "job.yml"))
    assert cfg.match == r"train\.py"
    assert cfg.bounds.checkpoint_max_s == 600.0  # 1.5 x save_s
    assert cfg.progress.for_node("n3") == (None, "/shared/hb/n3")
    written = job.replace("  progress:", "  bounds: {checkpoint_max_s: 100}\n  progress:")
    assert load_watch_config(write(tmp_path, written, "job2.yml")).bounds.checkpoint_max_s == 100
    empty = load_watch_config(write(tmp_path, "world_size: 16\nwatch:\n", "job3.yml"))
    assert empty == WatchConfig()


@pytest.mark.parametrize(
    "text, line, message",
    [
        (
            "progress:\n  log: /x\n  step_regex: 'step (\\d+'\n",
            3,
            "progress.step_regex: Value error, not a valid regular expression (missing ), unterminated subpattern "
            "at position 5)",
        ),
        (
            "progress:\n  step_regex: 'step (\\d+)'\n",
            2,
            "progress.step_regex: Value error, needs the named group (?P<step>...), e.g. ",
        ),
        (
            "progress:\n  rank_time_regex: 'rank (?P<rank>\\d+)'\n",
            2,
            "progress.rank_time_regex: Value error, needs the named group (?P<seconds>...)",
        ),
        ("progress:\n  done_regex: '.*'\n", 2, "progress.done_regex: Value error, matches the empty string"),
        ("bounds:\n  hang_after_s: -5\n", 2, "bounds.hang_after_s: Input should be greater than 0, got -5"),
        ("bounds:\n  hang_after_s: .inf\n", 2, "bounds.hang_after_s: Input should be a finite number"),
        ("interval_s: 0\n", 1, "interval_s: Input should be greater than 0, got 0"),
        (
            "bounds:\n  idle_util_pct: 95\n",
            1,
            "bounds: Value error, idle_util_pct (95) must be below busy_util_pct (90)",
        ),
        ("alerts:\n  url: ftp://x\n", 2, "alerts.url: Value error, must be an http:// or https:// URL with a host"),
        (
            'alerts:\n  command: "page \'oops"\n',
            2,
            "alerts.command: Value error, cannot be split into arguments (No closing quotation)",
        ),
        ("on_hang: kill\n", 1, "on_hang: Input should be 'cancel' or 'requeue', got 'kill'"),
        ("bounds:\n  hang_afer_s: 60\n", 2, "unknown key 'bounds.hang_afer_s'"),
        ("- a\n", 1, "a watch config is a mapping of settings"),
        ("watch: [1]\n", 1, "`watch:` must be a mapping of watch settings"),
    ],
)
def test_errors_name_the_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_watch_config(path)
    assert e.value.file == path and e.value.line == line
    assert e.value.message.startswith(message), e.value.message
    assert e.value.hint  # and the fix


def test_unknown_key_suggests_the_name(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_watch_config(write(tmp_path, "bounds:\n  hang_afer_s: 60\n"))
    assert e.value.hint == "did you mean 'hang_after_s'?"


def test_bad_save_s_in_job_yml(tmp_path):
    path = write(tmp_path, "checkpoint:\n  save_s: soon\nwatch: {match: x}\n", "job.yml")
    with pytest.raises(ConfigError) as e:
        load_watch_config(path)
    assert (e.value.line, e.value.message) == (2, "checkpoint.save_s must be a positive number of seconds, got 'soon'")


def test_error_inside_job_yml_watch_block_points_into_it(tmp_path):
    path = write(tmp_path, "world_size: 16\nwatch:\n  match: x\n  interval_s: -1\n", "job.yml")
    with pytest.raises(ConfigError) as e:
        load_watch_config(path)
    assert e.value.line == 4 and e.value.message.startswith("watch.interval_s: Input should be greater than 0")


def test_apply_overrides_returns_a_new_validated_config():
    base = WatchConfig(progress=ProgressSource(log="/file/{node}.log"), interval_s=60)
    cfg = apply_overrides(
        base,
        match="train",
        heartbeat="/hb",
        interval_s=5,
        alert_command="notify me",
        alert_url="http://h/x",
        on_hang="cancel",
    )
    assert cfg is not base and base.match is None
    assert (cfg.match, cfg.interval_s, cfg.on_hang) == ("train", 5, "cancel")
    assert (cfg.progress.log, cfg.progress.heartbeat) == ("/file/{node}.log", "/hb")
    assert cfg.alerts.argv == ("notify", "me") and cfg.alerts.url == "http://h/x"
    same = apply_overrides(base)
    assert same == base and same is not base
    assert apply_overrides(WatchConfig(), log="/l").progress.log == "/l"


def test_apply_overrides_errors_name_the_option():
    with pytest.raises(ConfigError, match=re.escape("no progress signal")) as e:
        apply_overrides(WatchConfig(), match="train")
    assert "--log PATH" in e.value.hint
    with pytest.raises(ConfigError) as e:
        apply_overrides(WatchConfig(), log="/l", alert_url="file:///etc/passwd")
    assert str(e.value).startswith("--alert-url: Value error, must be an http:// or https:// URL")
    with pytest.raises(ConfigError) as e:
        apply_overrides(WatchConfig(), log="/l", on_hang="kill")
    assert str(e.value).startswith("--on-hang: Input should be 'cancel' or 'requeue'")


# -- hostile review (R2) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "match: 'train_\\d+\\.py'\n",
            "match: Value error, is a POSIX extended regex (pgrep -f), where \\d is a plain 'd': write [0-9]",
        ),
        (
            "match: '(?i)train'\n",
            "match: Value error, is a POSIX extended regex (pgrep -f), which has no (?...) groups",
        ),
        ("match: 'train(\\.py'\n", "match: Value error, not a valid regular expression (missing ), unterminated"),
    ],
)
def test_a_match_pgrep_would_silently_never_match_is_refused(tmp_path, text, message):
    """glibc's ERE reads \\d as 'd': 'train_\\d+' matched nothing, the job looked never started, and a
    crash could never be seen."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_watch_config(path)
    assert (e.value.file, e.value.line) == (path, 1) and e.value.message.startswith(message)
    assert e.value.hint.startswith("match: the job's processes on each node: an extended regex")


def test_match_that_is_good_ere_is_kept():
    for pattern in (r"train\.py", r"[[:alnum:]_]+/train\.py --rank [0-9]+", r"a\\d", "-x"):
        assert WatchConfig(match=pattern).match == pattern
    with pytest.raises(ConfigError, match=r"--match: Value error, is a POSIX extended regex"):
        apply_overrides(WatchConfig(), match=r"\d+", log="/l")


def test_a_job_yml_without_a_watch_block_is_the_defaults_plus_what_the_job_says(tmp_path):
    """It was 'unknown key world_size' with a list of every nested key as the hint."""
    path = write(
        tmp_path, "world_size: 16\ngpus_per_node: 8\ncheckpoint: {dir: /c, every_steps: 500, save_s: 200}\n", "job.yml"
    )
    cfg = load_watch_config(path)
    assert (cfg.gpus_per_node, cfg.bounds.checkpoint_max_s) == (8, 300.0)
    assert cfg.model_dump(exclude={"gpus_per_node", "bounds"}) == WatchConfig().model_dump(
        exclude={"gpus_per_node", "bounds"}
    )
    # the watch block's own gpus_per_node wins
    with_block = write(tmp_path, "world_size: 16\ngpus_per_node: 8\nwatch: {gpus_per_node: 4}\n", "job2.yml")
    assert load_watch_config(with_block).gpus_per_node == 4


@pytest.mark.parametrize(
    "text, hint",
    [
        ("history: 1.5\n", "history: ticks kept in the state; see examples/watch.yml"),
        (
            "bounds:\n  low_power_fraction: 0\n",
            "bounds.low_power_fraction: board power <= this x power.limit is near idle; see examples/watch.yml",
        ),
        (
            "progress:\n  log: ''\n",
            "progress.log: the job's log on each node; {node} is replaced by the node's name; see examples/watch.yml",
        ),
        ("bounds:\n  idle_util_pct: 95\n", "see bounds in examples/watch.yml"),
        ("interval_s: 30s\n", "see interval_s in examples/watch.yml"),
    ],
)
def test_every_error_carries_a_fix(tmp_path, text, hint):
    with pytest.raises(ConfigError) as e:
        load_watch_config(write(tmp_path, text))
    assert e.value.hint == hint and e.value.line is not None


def test_a_rejected_alert_url_does_not_echo_its_credentials(tmp_path):
    from nodecheck.core.errors import ConfigError
    from nodecheck.watch.config import load_watch_config

    path = tmp_path / "watch.yml"
    path.write_text("match: train\nprogress: {log: /l}\nalerts: {url: 'ftp://alice:s3cret@h/x'}\n")
    with pytest.raises(ConfigError) as e:
        load_watch_config(str(path))
    assert "s3cret" not in str(e.value) and "alice" not in str(e.value)
    assert "got 'ftp://***@h/x'" in str(e.value) and ":3" in str(e.value)


def test_forensics_on_hang_from_the_file_and_the_command_line(tmp_path):
    assert load_watch_config(None).forensics is False
    on = load_watch_config(write(tmp_path, "match: 'train\\\\.py'\nforensics: true\n"))
    assert on.forensics is True
    assert apply_overrides(load_watch_config(None), log="/x", forensics=True).forensics is True
    assert apply_overrides(on, log="/x").forensics is True  # no flag: the file's value stays
    with pytest.raises(ConfigError, match="forensics"):
        load_watch_config(write(tmp_path, "forensics: 'on'\n", "bad.yml"))
