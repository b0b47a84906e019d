"""report.html at 16 and 1,024 nodes (issue 23): what the page costs to render, how big it is, and how
long Debian's headless chromium takes to load it. Two kinds of run, one process per size:

- "synthetic": tests/report/html_fixtures.synthetic_report (a few node checks a node, ib.pairs in ring
  pairing with one slow node and its matrix, nccl-tests runs with their captures, a drift fact);
- "prolog": bench_report.realistic (every node with the passive prolog playbook's ~50 results from a
  recorded 8x H100 node, 1 % drifted) with the synthetic run's ib.pairs and nccl-tests added: the
  per-node sections of a real run and the pictures of an active one.

Timed: render (render_run, captures read from memory), store (report/store with report.html beside
report.json: the html's share is its redaction and write), then chromium: driver.get() until the load
event, and the first contentful paint the page's own Performance API reports.

    .venv/bin/python benchmarks/bench_report_html.py [--nodes 16 1024] [--kind synthetic prolog]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def build(kind: str, n: int):
    from tests.report.html_fixtures import synthetic_report

    bad = f"gpu{max(1, n // 2):04d}"
    active = synthetic_report(n, bad, rack_size=32 if n > 64 else None)
    if kind == "synthetic":
        return active
    from bench_report import realistic

    base = realistic(n, 0.01, 64)
    # the realistic nodes are gpu00000..: the active checks' results, renamed onto them
    names = dict(zip((name for name, _ in active.nodes), (name for name, _ in base.nodes)))
    text = json.dumps(active.extras)
    for old, new in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(f'"{old}"', f'"{new}"')
    extras = {**base.extras, **json.loads(text)}
    active_results = [
        replace(r, nodes=tuple(names.get(x, x) for x in r.nodes), evidence=())
        for r in active.results
        if r.check in ("ib.pairs", "nccl.allreduce_single")
    ]
    captures = [replace(c, node=names.get(c.node, c.node)) for c in active.captures if c.probe.startswith("nccl")]
    return replace(base, results=(*base.results, *active_results), captures=(*base.captures, *captures), extras=extras)


def measure(kind: str, n: int) -> dict:
    from nodecheck.report import json as report_json
    from nodecheck.report import table
    from nodecheck.report.html.run_page import page_of
    from nodecheck.report.store import store

    started = time.perf_counter()
    report = report_json.redacted(build(kind, n))
    built = time.perf_counter() - started
    cpu = time.process_time()
    started = time.perf_counter()
    html = page_of(report)
    render_s, render_cpu = time.perf_counter() - started, time.process_time() - cpu
    out = Path(tempfile.mkdtemp(prefix="nodecheck-bench-html-"))
    started = time.perf_counter()
    where = store(report, table.render(report), out, report_json.dumps(report), html=html)
    store_s = time.perf_counter() - started
    page = where / "report.html"
    return {
        "kind": kind,
        "nodes": n,
        "results": len(report.results),
        "build_s": round(built, 2),
        "render_s": round(render_s, 2),
        "render_cpu_s": round(render_cpu, 2),
        "store_s": round(store_s, 2),
        "page_bytes": page.stat().st_size,
        "report_json_bytes": (where / "report.json").stat().st_size,
        "page": str(page),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def load_in_chromium(page: Path, repeats: int) -> dict:
    from tests.browser.chromium import chromium, errors, foreign_requests

    loads, paints, dom = [], [], 0
    with chromium(Path(tempfile.mkdtemp(prefix="nodecheck-bench-chromium-"))) as b:
        for _ in range(repeats + 1):  # the first load warms the browser up: not counted
            loaded = b.load(page)
            assert errors(loaded) == [] and foreign_requests(loaded) == [], (errors(loaded), foreign_requests(loaded))
            loads.append(loaded.load_s)
            paints.append(
                b.script(
                    "var p = performance.getEntriesByName('first-contentful-paint')[0];"
                    " return p ? p.startTime / 1000 : null"
                )
            )
            dom = b.script("return document.getElementsByTagName('*').length")
    loads, paints = loads[1:], [p for p in paints[1:] if p is not None]
    return {
        "load_s_median": round(sorted(loads)[len(loads) // 2], 2),
        "load_s_max": round(max(loads), 2),
        "first_paint_s_median": round(sorted(paints)[len(paints) // 2], 2) if paints else None,
        "dom_elements": dom,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[16, 1024])
    ap.add_argument("--kind", nargs="+", default=["synthetic", "prolog"], choices=["synthetic", "prolog"])
    ap.add_argument("--repeats", type=int, default=5, help="chromium loads per page (after one warm-up)")
    ap.add_argument("--one", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)  # a child: one size
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]))))
        return
    rows = []
    for kind in args.kind:
        for n in args.nodes:  # one process per size: peak RSS is that size's
            child = subprocess.run(
                [sys.executable, __file__, "--one", kind, str(n)], capture_output=True, text=True, check=True
            )
            row = json.loads(child.stdout.strip().splitlines()[-1])
            row.update(load_in_chromium(Path(row["page"]), args.repeats))
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print(
        "| kind | nodes | results | render | store | report.html | report.json "
        "| chromium load (median, max) | first paint | DOM elements |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['kind']} | {r['nodes']:,} | {r['results']:,} | {r['render_s']} s | {r['store_s']} s "
            f"| {r['page_bytes'] / 1e6:.2f} MB | {r['report_json_bytes'] / 1e6:.1f} MB "
            f"| {r['load_s_median']} s, {r['load_s_max']} s | {r['first_paint_s_median']} s | {r['dom_elements']:,} |"
        )
    for r in rows:
        shutil.rmtree(Path(r["page"]).parent.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
