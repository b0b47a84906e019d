"""Reports: JSON round-trips, the table folds identical outcomes, the store is atomic."""

import dataclasses
import json
import os
from datetime import datetime, timedelta, timezone

import pytest

from nodecheck.core.model import Capture, CheckResult, Evidence, Outcome, Status, Verdict
from nodecheck.report import Report, most_severe_first, table
from nodecheck.report import json as report_json
from nodecheck.report.store import store

T0 = datetime(2026, 11, 29, 9, 0, 0, tzinfo=timezone.utc)


def result(node, status, message, subject=""):
    ev = (Evidence(node, "ibstat", ("ibstat",), 0, f"captures/{node}/ibstat.txt"),)
    return CheckResult(
        "ib.ports", (node,), Verdict(status, message, subject, {"rate_gbps": 400.0}, {"min": 400.0}, "raw"), ev
    )


def sample(n=6, complete=True):
    names = [f"gpu{i:03d}" for i in range(1, n + 1)]
    results = [result(x, Status.PASS, f"{x} ok", "mlx5_0/1") for x in names[:-2]]
    results += [
        result(names[-2], Status.FAIL, "mlx5_3/1: Down/Polling, expected Active/LinkUp", "mlx5_3/1"),
        result(names[-1], Status.UNREACHABLE, f"unreachable: connection refused by 10.0.0.{n}:22"),
    ]
    caps = tuple(
        Capture(x, "ibstat", ("ibstat",), Outcome.EXITED, 0, "CA 'mlx5_0'\n", "warn\n", 0.1) for x in names[:-1]
    )
    return Report(
        "20261129T090000Z_default",
        "default",
        "playbooks/default.yml",
        "ab" * 32,
        "hosts.yml",
        T0,
        T0 + timedelta(seconds=2),
        120.0,
        complete,
        tuple((x, f"10.0.0.{i}") for i, x in enumerate(names, 1)),
        tuple(results),
        caps,
        "0.1.0",
    )


def test_json_has_the_documented_schema():
    d = json.loads(report_json.dumps(sample()))
    assert (d["report_version"], d["status"], d["exit_code"], d["complete"]) == (3, "fail", 2, True)
    assert d["started"] == "2026-11-29T09:00:00.000000Z"
    assert d["summary"] == {"pass": 4, "unreachable": 1, "fail": 1}
    assert [n["status"] for n in d["nodes"]] == ["pass"] * 4 + ["fail", "unreachable"]
    r = d["nodes"][4]["results"][0]
    assert {k: r[k] for k in ("check", "status", "subject")} == {
        "check": "ib.ports",
        "status": "fail",
        "subject": "mlx5_3/1",
    }
    assert r["observed"] == {"rate_gbps": 400.0} and r["evidence"][0]["capture"] == "captures/gpu005/ibstat.txt"


def test_json_round_trips():
    original = sample()
    loaded = report_json.loads(report_json.dumps(original))
    assert loaded.results == original.results
    assert (loaded.started, loaded.nodes, loaded.status) == (original.started, original.nodes, original.status)
    assert [(c.node, c.outcome) for c in loaded.captures] == [(c.node, c.outcome) for c in original.captures]


def test_table_folds_identical_outcomes_worst_first():
    text = table.render(sample())
    lines = text.splitlines()
    rows = [ln for ln in lines if ln.startswith("gpu")]
    assert rows[0].split()[:3] == ["gpu005", "fail", "ib.ports"]
    assert rows[1].split()[:3] == ["gpu006", "unreachable", "ib.ports"]
    assert rows[2].split()[:3] == ["gpu[001-004]", "pass", "ib.ports"]
    assert (
        "unhealthy nodes:" in text
        and "gpu006  unreachable  ib.ports: unreachable: connection refused by 10.0.0.6:22" in text
    )
    assert "6 nodes: 4 pass, 1 unreachable, 1 fail. Status FAIL (exit 2)." in text


def test_the_same_failure_on_many_nodes_is_one_row_even_with_per_node_addresses():
    names = [f"n{i}" for i in range(1, 5)]
    results = tuple(
        result(x, Status.UNREACHABLE, f"unreachable: connection refused by 10.0.0.{i}:22")
        for i, x in enumerate(names, 1)
    )
    r = Report(
        "id", "p", "p", "", None, T0, T0, 1.0, True, tuple((x, f"10.0.0.{i}") for i, x in enumerate(names, 1)), results
    )
    rows = [ln for ln in table.render(r).splitlines() if ln.startswith("n[")]
    assert rows == ["n[1-4]   unreachable  ib.ports  unreachable: connection refused by <address>:22"]


def test_an_incomplete_report_says_so():
    assert "INCOMPLETE: the run deadline was reached (deadline 120 s)" in table.render(sample(complete=False))


def test_store_writes_the_whole_report_atomically(tmp_path):
    report = sample()
    where = store(report, "summary\n", tmp_path)
    assert where == tmp_path / "20261129T090000Z_default"
    assert json.loads((where / "report.json").read_text())["run_id"] == report.run_id
    assert (where / "summary.txt").read_text() == "summary\n"
    assert (where / "captures/gpu001/ibstat.txt").read_text() == "CA 'mlx5_0'\n"
    assert (where / "captures/gpu001/ibstat.stderr.txt").read_text() == "warn\n"
    assert sorted(os.listdir(tmp_path)) == ["20261129T090000Z_default"]  # no temporary left
    second = store(report, "again\n", tmp_path)
    assert second.name == "20261129T090000Z_default-2"
    assert (where / "summary.txt").read_text() == "summary\n"  # not overwritten


def test_a_report_is_not_readable_by_others_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        where = store(sample(), "summary\n", tmp_path / "reports")
    finally:
        os.umask(old)
    modes = {str(p.relative_to(where)): oct(p.stat().st_mode & 0o777) for p in [where, *where.rglob("*")]}
    assert {k: v for k, v in modes.items() if "gpu001" in k or "/" not in k} == {
        ".": "0o750",
        "report.json": "0o640",
        "summary.txt": "0o640",
        "captures": "0o750",
        "captures/gpu001": "0o750",
        "captures/gpu001/ibstat.txt": "0o640",
        "captures/gpu001/ibstat.stderr.txt": "0o640",
    }
    assert {v for k, v in modes.items() if (where / k).is_dir()} == {"0o750"}
    assert {v for k, v in modes.items() if (where / k).is_file()} == {"0o640"}
    assert oct((tmp_path / "reports").stat().st_mode & 0o777) == "0o750"  # made by nodecheck: closed too


def test_a_failed_store_leaves_nothing_behind(tmp_path, monkeypatch):
    import nodecheck.report.store as st

    def broken(path, text, access):
        if path.name == "summary.txt":
            raise OSError(28, "No space left on device")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    monkeypatch.setattr(st, "_write", broken)
    with pytest.raises(OSError):
        store(sample(), "s", tmp_path)
    assert os.listdir(tmp_path) == []


def test_templating_replaces_whole_names_only():
    """n1's "peer n10" and n2's "peer n20" are different failures, not one "peer <node>0"."""
    results = (result("n1", Status.FAIL, "peer n10 down"), result("n2", Status.FAIL, "peer n20 down"))
    r = Report("id", "p", "p", "", None, T0, T0, 1.0, True, (("n1", "10.0.0.1"), ("n2", "10.0.0.2")), results)
    lines = table.render(r).splitlines()
    assert "n1       fail      ib.ports  peer n10 down" in lines
    assert "n2       fail      ib.ports  peer n20 down" in lines


def test_a_killed_runs_old_temporary_is_cleaned_up_but_a_fresh_one_is_left(tmp_path):
    old, fresh = tmp_path / ".tmp-old-run", tmp_path / ".tmp-running-now"
    old.mkdir()
    fresh.mkdir()
    os.utime(old, (0, 0))
    store(sample(), "s", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-running-now", "20261129T090000Z_default"]


def test_the_same_verdict_twice_on_one_node_survives_a_round_trip():
    from datetime import datetime, timezone

    from nodecheck.core.model import CheckResult, Status, Verdict
    from nodecheck.report import Report
    from nodecheck.report import json as report_json

    twice = CheckResult("gpu.xid", ("n1",), Verdict(Status.ERROR, "unreadable Xid line: cut short"))
    group = CheckResult("nccl.version", ("n1", "n2"), Verdict(Status.PASS, "NCCL 2.23.4 (all 2 nodes agree)"))
    now = datetime(2026, 11, 29, tzinfo=timezone.utc)
    report = Report(
        "r", "p", "p", "0" * 64, None, now, now, 10, True, (("n1", "a1"), ("n2", "a2")), (twice, twice, group)
    )
    back = report_json.loads(report_json.dumps(report))
    assert back.results == (twice, twice, group)


def test_an_incomplete_run_whose_results_all_passed_never_exits_0():
    """A safety net under the checks: a run the deadline or a signal cut short did not check all it
    planned, so healthy results alone are no clean bill of health (exit 3); a failure stays 2."""
    healthy = dataclasses.replace(
        sample(n=3), results=tuple(r for r in sample(n=3).results if r.verdict.status is Status.PASS)
    )
    healthy = dataclasses.replace(healthy, nodes=healthy.nodes[:1])
    assert healthy.status is Status.PASS and healthy.exit_code == 0
    cut = dataclasses.replace(healthy, complete=False, incomplete_reason="the run deadline was reached")
    assert cut.status is Status.PASS and cut.exit_code == 3
    assert json.loads(report_json.dumps(cut))["exit_code"] == 3
    assert dataclasses.replace(sample(), complete=False).exit_code == 2


def test_redacted_masks_every_copy_of_a_repeated_argv_and_message():
    # a probe's argv and a verdict's text repeat on every node: each distinct text is scanned once
    # (issue 22), and every copy, in every result's evidence and every capture, still comes out masked
    argv = ("sh", "-c", "probe --token s3cr3t-value", "HF_TOKEN=abcdef")
    names = [f"gpu{i:03d}" for i in range(1, 5)]
    results = tuple(
        CheckResult(
            "x.check",
            (node,),
            Verdict(Status.PASS, "env HF_TOKEN=abcdef seen", "HF_TOKEN=abcdef", {}, {}, "HF_TOKEN=abcdef"),
            (Evidence(node, "p", argv, 0, f"captures/{node}/p.txt"),),
        )
        for node in names
    )
    caps = tuple(Capture(n, "p", argv, Outcome.EXITED, 0, "", "", 0.1, "HF_TOKEN=abcdef") for n in names)
    report = dataclasses.replace(sample(), nodes=tuple((n, n) for n in names), results=results, captures=caps)
    out = report_json.redacted(report)
    masked = ("sh", "-c", "probe --token <redacted>", "HF_TOKEN=<redacted>")
    assert [e.argv for r in out.results for e in r.evidence] == [masked] * 4
    assert [c.argv for c in out.captures] == [masked] * 4
    assert {(r.verdict.message, r.verdict.subject, r.verdict.excerpt) for r in out.results} == {
        ("env HF_TOKEN=<redacted> seen", "HF_TOKEN=<redacted>", "HF_TOKEN=<redacted>")
    }
    assert [c.detail for c in out.captures] == ["HF_TOKEN=<redacted>"] * 4
    assert "abcdef" not in report_json.dumps(report) and "s3cr3t" not in report_json.dumps(report)


def test_store_syncs_every_file_and_directory_before_it_publishes(tmp_path, monkeypatch):
    # the fsyncs run several at a time (issue 22: 32,000 captures at 2,000 nodes); still, nothing is
    # renamed into place before every file's bytes and every directory's entries are on disk
    from nodecheck.report import store as store_module

    synced: set[str] = set()
    real_fsync, real_publish = os.fsync, store_module._publish
    lock = __import__("threading").Lock()

    def fsync(fd):
        with lock:
            synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    seen_at_publish: dict[str, set[str]] = {}

    def publish(tmp, root, run_id):
        seen_at_publish["written"] = {str(p) for p in tmp.rglob("*")} | {str(tmp)}
        seen_at_publish["synced"] = set(synced)
        return real_publish(tmp, root, run_id)

    monkeypatch.setattr(store_module.os, "fsync", fsync)
    monkeypatch.setattr(store_module, "_publish", publish)
    where = store(sample(40), "summary\n", tmp_path / "reports")
    assert len(seen_at_publish["written"]) > 40 + 39  # 39 captures, their node folders, report.json ...
    assert seen_at_publish["written"] <= seen_at_publish["synced"]
    assert (where / "captures/gpu001/ibstat.txt").read_text() == "CA 'mlx5_0'\n"


def worst_last_node() -> Report:
    """The node a real host showed: three long ERRORs first in playbook order, then FAILs of
    services, time.sync and limits, a WARN among them (healthy: never a reason)."""
    unable = "cannot read the tool's output: " + "x" * 90  # three of these fill REASON_MAX_CHARS
    verdicts = [
        ("kernel.modules", Status.ERROR, f"{unable} (modules)"),
        ("pcie.acs", Status.ERROR, f"{unable} (lspci)"),
        ("nvidia.libraries", Status.WARN, "libnvidia-nvvm.so.4 not in the loader's cache"),
        ("gpu.health", Status.ERROR, f"{unable} (nvidia-smi)"),
        ("services", Status.FAIL, "slurmd inactive (dead), expected active"),
        ("time.sync", Status.FAIL, "no time synchronisation found"),
        ("limits", Status.FAIL, "memlock 64 KiB (slurmd's limits), expected unlimited"),
    ]
    results = tuple(CheckResult(check, ("n1",), Verdict(status, message)) for check, status, message in verdicts)
    return Report("id", "p", "p", "", None, T0, T0, 1.0, True, (("n1", "10.0.0.1"),), results)


def test_the_reason_line_names_the_failures_before_what_could_not_be_judged():
    reason = table.node_reason(worst_last_node().results_for("n1"))
    assert reason.startswith(
        "services: slurmd inactive (dead), expected active; time.sync: no time synchronisation found; "
        "limits: memlock 64 KiB (slurmd's limits), expected unlimited; kernel.modules: cannot read"
    )
    assert "nvidia.libraries" not in reason and len(reason) == table.REASON_MAX_CHARS
    unhealthy = table.render(worst_last_node()).split("unhealthy nodes:\n")[1]
    assert unhealthy.startswith("n1  fail  services: slurmd inactive (dead), expected active; time.sync: ")


def test_severity_orders_reasons_fail_then_no_answer_then_error_then_skipped_playbook_order_within():
    said = [
        ("a", Status.SKIPPED),
        ("b", Status.ERROR),
        ("c", Status.UNREACHABLE),
        ("d", Status.WARN),
        ("e", Status.TIMEOUT),
        ("f", Status.FAIL),
        ("g", Status.ERROR),
        ("h", Status.UNREACHABLE),
    ]
    results = [CheckResult(check, ("n1",), Verdict(status, "m")) for check, status in said]
    # a timeout and an unreachable host alike: neither answered, so the playbook decides between them
    assert [r.check for r in most_severe_first(results)] == ["f", "c", "e", "h", "b", "g", "a", "d"]


def test_every_failing_check_is_named_before_one_check_repeats():
    # a node without its daemons: services FAILs three times, each message long; time.sync and limits
    # failed too and must not be cut for services' second and third
    gone = [f"{d}.service not running: no process named {d} on this node, expected running" for d in ("a", "b", "c")]
    said = [
        ("services", Status.FAIL, gone[0]),
        ("services", Status.FAIL, gone[1]),
        ("services", Status.FAIL, gone[2]),
        ("time.sync", Status.ERROR, "chronyc: 506 Cannot talk to daemon"),
        ("time.sync", Status.FAIL, "no time synchronisation found"),
        ("limits", Status.FAIL, "memlock 64 KiB (slurmd's limits), expected unlimited"),
    ]
    results = [CheckResult(check, ("n1",), Verdict(status, message)) for check, status, message in said]
    assert table.node_reason(results).startswith(
        f"services: {gone[0]}; time.sync: no time synchronisation found; "
        f"limits: memlock 64 KiB (slurmd's limits), expected unlimited; services: {gone[1]}"
    )
    # the playbook's order, when known, decides within a severity (the gate's drain reason)
    first = most_severe_first(results, order=["limits", "time.sync", "services"])
    assert [(r.check, r.verdict.status) for r in first][:4] == [
        ("limits", Status.FAIL),
        ("time.sync", Status.FAIL),
        ("services", Status.FAIL),
        ("services", Status.FAIL),
    ]
