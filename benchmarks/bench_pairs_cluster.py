"""ib.pairs end to end on a simulated cluster: rounds, tests and wall time to the right verdict,
ring + localization versus all-pairs, for one bad node and for one bad link.

Each case is one `nodecheck run` over real SSH against N simulated nodes; every node's fake
ib_write_bw really rendezvouses with its partner over TCP and reports the bandwidth the scenario
gives the pair (392 Gb/s, the bad node 150, the bad link 90). The numbers come from the report:
extras["ib.pairs"] (rounds, tests, bad_nodes, bad_links) and the verdicts. Run it through
benchmarks/pairs.sh (root, private network namespace).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from harness.cluster import SimCluster  # noqa: E402
from harness.scenarios import IB_CAS, IBSTAT_HEALTHY, Fabric, Replay, apply  # noqa: E402


def case(
    cluster: SimCluster, n: int, pairing: str, bad_node: str | None, bad_link: tuple[str, str] | None, workdir: Path
) -> dict:
    layout = {f"node{i}": [Replay("ibstat", IBSTAT_HEALTHY)] for i in range(1, n + 1)}
    layout["*"] = [
        Fabric(
            devices=IB_CAS,
            test_s=0.2,
            nodes=((bad_node, (("gbps", 150.0),)),) if bad_node else (),
            links=((*bad_link, 90.0),) if bad_link else (),
        )
    ]
    apply(cluster, layout)
    book = workdir / "pairs.yml"
    book.write_text(
        f"version: 1\ndeadline_s: 900\nchecks:\n  ib.pairs: {{devices: [mlx5_0], pairing: {pairing}, "
        "duration_s: 1, test_timeout_s: 10}\n"
    )
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodecheck",
            "run",
            str(cluster.inventory_path),
            "--nodes",
            f"node[1-{n}]",
            "--playbook",
            str(book),
            "--format",
            "json",
            "--output-dir",
            str(workdir / "reports"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    wall = time.monotonic() - started
    doc = json.loads(proc.stdout)
    extras = doc["extras"]["ib.pairs"]
    flagged = {n_["node"] for n_ in doc["nodes"] if n_["status"] != "pass"}
    want_nodes = [bad_node] if bad_node else []
    want_links = [sorted(bad_link)] if bad_link else []
    right = (
        extras["bad_nodes"] == want_nodes
        and sorted(map(sorted, extras["bad_links"])) == want_links
        and not extras["unresolved"]
        and flagged == set(want_nodes) | {x for link in want_links for x in link}
    )
    return {
        "rounds": extras["rounds"],
        "tests": extras["pairs_tested"],
        "wall_s": round(wall, 2),
        "right": right,
        "exit": proc.returncode,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--nodes", type=int, default=32)
    args = ap.parse_args()
    n = args.nodes
    cluster = SimCluster(state_dir=args.state_dir).up(n)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            mid = f"node{n // 2 + 1}"
            for label, bad_node, bad_link in (
                ("1 bad node", mid, None),
                ("1 bad link (ring neighbours)", None, ("node9", "node10")),
                ("healthy", None, None),
            ):
                for pairing in ("ring", "all"):
                    r = case(cluster, n, pairing, bad_node, bad_link, work)
                    rows.append(
                        [
                            label,
                            pairing + (" + localization" if pairing == "ring" else ""),
                            "yes" if r["right"] else "NO",
                            r["rounds"],
                            r["tests"],
                            r["wall_s"],
                            r["exit"],
                        ]
                    )
                    print(rows[-1], file=sys.stderr)
    finally:
        cluster.down()
    print(f"{n} simulated nodes, real SSH and TCP rendezvous, one HCA per pair, 0.2 s per test\n")
    print(
        tabulate(
            rows,
            headers=["scenario", "pairing", "right verdict", "rounds", "pairs tested", "wall s", "exit"],
            tablefmt="github",
        )
    )
    ok = all(r[2] == "yes" for r in rows) and all(r[3] <= 3 for r in rows if r[0] == "1 bad node" and r[1] != "all")
    print("\ntarget <= 3 rounds for one bad node (ring): " + ("met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
