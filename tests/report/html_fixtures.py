"""A synthetic run of any size for the HTML page's tests and measurements: node checks, a drift fact,
ib.pairs in ring pairing with one slow node (its extras: results per rail, the matrix, the blame),
single-node nccl-tests runs with their captures. Built directly (no runner): 1,024 nodes in well
under a second."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from nodecheck.core.model import Capture, CheckResult, Evidence, Outcome, Status, Verdict
from nodecheck.report import Report, capture_relpath

RAILS = tuple(f"mlx5_{i}" for i in (0, 3, 4, 5, 6, 9, 10, 11))
GOOD_GBPS, SLOW_GBPS, FLOOR_GBPS, WARN_GBPS = 392.0, 150.0, 320.0, 360.0
NCCL_FLOOR = 400.0
_ARGV = ("bash", "-c", "probe")


def node_names(n_nodes: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(1, n_nodes + 1)]


def synthetic_report(n_nodes: int, bad: str, *, rack_size: int | None = None) -> Report:
    """`n_nodes` nodes gpu0001..; `bad` (one of them) is slow on every HCA: its pair tests fail and
    ib.pairs blames it, its nccl-tests run is slow. rack_size: nodes per rack label ("r01", ...)
    in the ib.pairs extras, as a playbook's group_label gives; None: no labels."""
    nodes = node_names(n_nodes)
    if bad not in nodes:
        raise ValueError(f"{bad!r} is not one of the {n_nodes} synthetic nodes")
    started = datetime(2026, 12, 6, 12, 0, 0, tzinfo=timezone.utc)
    results: list[CheckResult] = []
    captures: list[Capture] = []
    for node in nodes:
        results += _node_results(node, slow=node == bad)
        captures += _node_captures(node, slow=node == bad)
    # a drift fact: one node on another driver
    odd = nodes[-1] if nodes[-1] != bad else nodes[0]
    majority = tuple(n for n in nodes if n != odd)
    results.append(
        CheckResult(
            "gpu.driver",
            majority,
            Verdict(
                Status.PASS,
                f"NVIDIA driver 550.90.07 (majority: {len(majority)} of {n_nodes} nodes)",
                "",
                {"driver": "550.90.07"},
            ),
        )
    )
    results.append(
        CheckResult(
            "gpu.driver",
            (odd,),
            Verdict(
                Status.FAIL,
                "NVIDIA driver 535.54.03, expected 550.90.07",
                "",
                {"driver": "535.54.03"},
                {"driver": "550.90.07"},
            ),
        )
    )
    pairs_extras, pair_results = _pairs(nodes, bad, rack_size)
    results += pair_results
    return Report(
        run_id=f"20261206T120000Z_synthetic{n_nodes}",
        playbook="synthetic",
        playbook_path="playbooks/synthetic.yml",
        playbook_sha256="0" * 64,
        inventory="hosts.yml",
        started=started,
        finished=started + timedelta(seconds=95.5),
        deadline_s=600.0,
        complete=True,
        nodes=tuple((n, f"10.0.{i // 250}.{i % 250 + 1}") for i, n in enumerate(nodes)),
        results=tuple(results),
        captures=tuple(captures),
        nodecheck_version="0.1.0",
        extras={"ib.pairs": pairs_extras},
    )


def _node_results(node: str, slow: bool) -> list[CheckResult]:
    out = []
    for check, subject, message in (
        ("gpu.count", "", "8 GPUs (== 8)"),
        ("mem", "", "2015 GiB total (>= 2000 GiB)"),
        ("ib.ports", "mlx5_0/1", "mlx5_0/1: Active/LinkUp 400 Gb/s"),
        ("ib.ports", "mlx5_3/1", "mlx5_3/1: Active/LinkUp 400 Gb/s"),
        ("kernel.modules", "nvidia_peermem", "nvidia_peermem loaded"),
    ):
        out.append(
            CheckResult(
                check,
                (node,),
                Verdict(Status.PASS, message, subject, {"value": message.split()[0]}),
                (Evidence(node, "ibstat", _ARGV, 0, capture_relpath(node, "ibstat")),),
            )
        )
    busbw = 180.0 if slow else 472.6
    status = Status.FAIL if slow else Status.PASS
    words = f"expected >= {NCCL_FLOOR:g} GB/s" if slow else f"(>= {NCCL_FLOOR + 40:g} GB/s)"
    out.append(
        CheckResult(
            "nccl.allreduce_single",
            (node,),
            Verdict(
                status,
                f"all_reduce: busbw {busbw} GB/s {words} at >= 1 GiB, 8 ranks",
                "all_reduce",
                {"stage": "done", "busbw_plateau_gbs": busbw},
                {"busbw_gbps": {"fail_below": NCCL_FLOOR, "warn_below": NCCL_FLOOR + 40}},
            ),
            (Evidence(node, "nccl_all_reduce", _ARGV, 0, capture_relpath(node, "nccl_all_reduce")),),
        )
    )
    return out


def _node_captures(node: str, slow: bool) -> list[Capture]:
    ibstat = "CA 'mlx5_0'\n\tCA type: MT4129\n\tPort 1:\n\t\tState: Active\n\t\tRate: 400\n"
    return [
        Capture(node, "ibstat", _ARGV, Outcome.EXITED, 0, ibstat, "", 0.05),
        Capture(
            node, "nccl_all_reduce", _ARGV, Outcome.EXITED, 0, nccl_output(node, 180.0 if slow else 472.6), "", 12.0
        ),
    ]


def nccl_output(node: str, plateau: float) -> str:
    """A single-node all_reduce_perf run (the probe's `test` section), busbw rising to `plateau`."""
    lines = [
        "@@nodecheck begin test",
        "# nccl-tests version 2.17.9 nccl-headers=22902 nccl-library=22902",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1"
        " validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for g in range(8):
        lines.append(
            f"#  Rank  {g} Group  0 Pid  1234 on {node:>10} device  {g} [0000:{0x18 + g:02x}:00] NVIDIA H100 80GB HBM3"
        )
    lines += [
        "NCCL version 2.29.2+cuda12.4",
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong ",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
        "     (us)  (GB/s)  (GB/s)         ",
    ]
    for k in range(3, 34):
        size = 1 << k
        busbw = plateau * size / (size + (64 << 20))
        algbw = busbw * 8 / 14
        time_us = size / (algbw * 1e3) if algbw > 0 else 0.0
        half = f" {time_us:>8.2f} {algbw:>7.2f} {busbw:>7.2f} {0:>7}"  # out-of-place, then in-place
        lines.append(f"{size:>12} {size // 4:>13} {'float':>9} {'sum':>7} {-1:>7}" + half + half)
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {plateau / 3:.3f} ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "@@nodecheck end test rc=0",
    ]
    return "\n".join(lines) + "\n"


def _pairs(nodes: list[str], bad: str, rack_size: int | None) -> tuple[dict, list[CheckResult]]:
    """Ring pairing: round 1 pairs (0,1), (2,3), ...; round 2 (1,2), (3,4), ..., (last, 0). Each
    pair tests every rail both ways."""
    n = len(nodes)
    rounds = [[(i, i + 1) for i in range(0, n - 1, 2)], [(i, (i + 1) % n) for i in range(1, n, 2)]]
    tests, matrix = [], {}
    partners: dict[str, list[str]] = {}
    for rnd, pairs in enumerate(rounds, 1):
        for i, j in pairs:
            a, b = nodes[i], nodes[j]
            if a == b or b in matrix.get(a, {}):
                continue
            gbps = SLOW_GBPS if bad in (a, b) else GOOD_GBPS
            status = "fail" if gbps < FLOOR_GBPS else "pass"
            for device in RAILS:
                for server, client in ((a, b), (b, a)):
                    words = f"expected >= {FLOOR_GBPS:g} Gb/s" if status == "fail" else f"(>= {WARN_GBPS:g} Gb/s)"
                    tests.append(
                        {
                            "round": rnd,
                            "server": server,
                            "client": client,
                            "device": device,
                            "status": status,
                            "gbps": gbps,
                            "message": f"{device} {client}->{server} {gbps:g} Gb/s"
                            + ("," if status == "fail" else "")
                            + f" {words}",
                        }
                    )
            matrix.setdefault(a, {})[b] = gbps
            matrix.setdefault(b, {})[a] = gbps
            partners.setdefault(a, []).append(b)
            partners.setdefault(b, []).append(a)
    extras: dict = {
        "pairing": "ring",
        "rounds": len(rounds),
        "tests": len(tests),
        "pairs_tested": sum(len(row) for row in matrix.values()) // 2,
        "all_pairs_would_be": n * (n - 1) // 2,
        "results": tests,
        "matrix_gbps": matrix,
        "bad_nodes": [bad],
        "bad_links": [],
        "unresolved": [],
        "evidence": {
            bad: f"{len(partners.get(bad, []))}/{len(partners.get(bad, []))} pairs failed; partners pass with others"
        },
    }
    if rack_size:
        extras["group_label"] = "rack"
        extras["groups"] = {node: f"r{i // rack_size + 1:02d}" for i, node in enumerate(nodes)}
    results = []
    for node in nodes:
        if node == bad:
            verdict = Verdict(
                Status.FAIL,
                f"bad node: fails with {len(partners.get(bad, []))} partners, which pass with others "
                f"(expected >= {FLOOR_GBPS:g} Gb/s)",
                "",
                {"failed_with": partners.get(bad, [])},
                {"min": FLOOR_GBPS},
            )
        else:
            verdict = Verdict(
                Status.PASS,
                f"{len(partners.get(node, []))} partners, every HCA >= {WARN_GBPS:g} Gb/s",
                "",
                {},
                {"min": FLOOR_GBPS},
            )
        results.append(
            CheckResult(
                "ib.pairs", (node,), verdict, (Evidence(node, "ibstat", _ARGV, 0, capture_relpath(node, "ibstat")),)
            )
        )
    return extras, results
