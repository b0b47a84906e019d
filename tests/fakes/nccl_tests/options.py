"""nccl-tests' options (src/common.cu): the long options of each layout, the usage text, and
parsing a command line into Options."""

from __future__ import annotations

import os
from dataclasses import dataclass

from nccl_tests.libc import getopt_long, parsesize, strtol
from nccl_tests.state import write_err, write_out

LONG_217 = [
    ("nthreads", True, "t"),
    ("ngpus", True, "g"),
    ("minbytes", True, "b"),
    ("maxbytes", True, "e"),
    ("stepbytes", True, "i"),
    ("stepfactor", True, "f"),
    ("iters", True, "n"),
    ("agg_iters", True, "m"),
    ("warmup_iters", True, "w"),
    ("run_cycles", True, "N"),
    ("parallel_init", True, "p"),
    ("check", True, "c"),
    ("op", True, "o"),
    ("datatype", True, "d"),
    ("root", True, "r"),
    ("blocking", True, "z"),
    ("stream_null", True, "y"),
    ("timeout", True, "T"),
    ("cudagraph", True, "G"),
    ("report_cputime", True, "C"),
    ("report_timestamps", True, "S"),
    ("output_file", True, "J"),
    ("average", True, "a"),
    ("local_register", True, "R"),
    ("cta_policy", True, "x"),
    ("device_implementation", True, "D"),
    ("device_cta_count", True, "V"),
    ("memory", True, "M"),
]


OPTIONS = {
    "2.17": ("t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:", LONG_217 + [("help", False, "h")]),
    "newest": (
        "t:g:b:e:i:f:n:m:w:N:p:I:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:",
        LONG_217 + [("unalign", True, "u"), ("per_iter_timing", True, "I"), ("help", False, "h")],
    ),
}


_USAGE_HEAD = [
    "[-t,--nthreads <num threads>] ",
    "[-g,--ngpus <gpus per thread>] ",
    "[-b,--minbytes <min size in bytes>] ",
    "[-e,--maxbytes <max size in bytes>] ",
    "[-i,--stepbytes <increment size>] ",
    "[-f,--stepfactor <increment factor>] ",
    "[-n,--iters <iteration count>] ",
    "[-m,--agg_iters <aggregated iteration count>] ",
    "[-w,--warmup_iters <warmup iteration count>] ",
    "[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] ",
    "[-p,--parallel_init <0/1>] ",
    "[-c,--check <check iteration count>] ",
    "[-o,--op <sum/prod/min/max/avg/mulsum/all>] ",
    "[-d,--datatype <nccltype/all>] ",
    "[-r,--root <root>] ",
]


_USAGE_MID = [
    "[-y,--stream_null <0/1>] ",
    "[-T,--timeout <time in seconds>] ",
    "[-G,--cudagraph <num graph launches>] ",
    "[-C,--report_cputime <0/1>] ",
    "[-S,--report_timestamps <0/1> report timestamps (default 0)] ",
    "[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix "
    "(only json supported presently.)] ",
    "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] ",
    "[-R,--local_register <0/1/2> enable local (1) or symmetric (2) buffer registration on "
    "send/recv buffers (default: disable (0))] ",
    "[-x,--cta_policy <0/1/2> set CTA policy (NCCL_CTA_POLICY_DEFAULT (0), NCCL_CTA_POLICY_EFFICIENCY "
    "(1), NCCL_CTA_POLICY_ZERO (2)) (default: do not set)] ",
    "[-D,--device_implementation <implementation number> enable device implementation (default: 0, "
    "use NCCL implementation; requires -R 2 if > 0)] ",
    "[-V,--device_cta_count <number> set number of CTAs for device implementation (default: 16)] ",
]


USAGE = {  # the printf of common.cu's default: case, "\n\t" between the entries
    "2.17": _USAGE_HEAD
    + ["[-z,--blocking <0/1>] "]
    + _USAGE_MID
    + ["[-M,--memory_report <0/1> enable memory usage report (default: 0)] ", "[-h,--help]"],
    "newest": _USAGE_HEAD
    + ["[-z,--blocking <0/1/2> 1=wait for completion and barrier (default behavior), 2=wait without barrier] "]
    + _USAGE_MID
    + [
        "[-M,--memory <0/1> enable memory usage report (default: 0)] ",
        "[-u,--unalign <index of first element> Misalign source and destination buffers (default: 0)] ",
        "[-I,--per_iter_timing <0/1> per-iteration CUDA event timing\n\t"
        "    (best with -z 0 or -z 2; with -z 1 includes barrier wait;\n\t"
        "    i_p99 uses nearest-rank percentile and may equal i_max\n\t"
        "    with <100 samples) (default: 0)] ",
        "[-h,--help]",
    ],
}


TYPES = [
    ("int8", 1),
    ("uint8", 1),
    ("int32", 4),
    ("uint32", 4),
    ("int64", 8),
    ("uint64", 8),
    ("half", 2),
    ("float", 4),
    ("double", 8),
    ("bfloat16", 2),
    ("f8e4m3", 1),
    ("f8e5m2", 1),
]


OPS = ["sum", "prod", "max", "min", "avg", "mulsum"]


@dataclass
class Options:
    nthreads: int = 1
    ngpus: int = 1
    min_bytes: int = 32 << 20
    max_bytes: int = 32 << 20
    step_bytes: int = 1 << 20
    step_factor: int = 1
    iters: int = 20
    agg_iters: int = 1
    warmup_iters: int = 1
    run_cycles: int = 1
    parallel_init: int = 0
    check: int = 1
    op: int = 0  # index into OPS; -1 = all
    datatype: int = 7  # index into TYPES (float); -1 = all
    blocking: int = 0
    graph: int = 0
    cputime: int = 0
    timestamps: int = 0
    unalign: int = 0
    output_file: str | None = None


def usage_text(layout: str, prog: str) -> str:
    return f"USAGE: {os.path.basename(prog)} \n\t" + "\n\t".join(USAGE[layout]) + "\n"


def parse_options(layout: str, prog: str, args: list[str], ntypes: int) -> Options | int:
    """main()'s getopt loop: Options, or the exit code (usage printed: 0, bad size: 255)."""
    o = Options()
    shortopts, longopts = OPTIONS[layout]
    for c, v in getopt_long(prog, args, shortopts, longopts):
        v = v or ""
        if c in "bei":
            parsed = parsesize(v)
            if parsed < 0:
                write_err("invalid size specified for '%s'\n" % {"b": "minbytes", "e": "maxbytes", "i": "stepBytes"}[c])
                return 255
            setattr(o, {"b": "min_bytes", "e": "max_bytes", "i": "step_bytes"}[c], int(parsed))
        elif c in "tgfnmwNpczGCSu" and len(c) == 1:
            attr = {
                "t": "nthreads",
                "g": "ngpus",
                "f": "step_factor",
                "n": "iters",
                "m": "agg_iters",
                "w": "warmup_iters",
                "N": "run_cycles",
                "p": "parallel_init",
                "c": "check",
                "z": "blocking",
                "G": "graph",
                "C": "cputime",
                "S": "timestamps",
                "u": "unalign",
            }[c]
            setattr(o, attr, strtol(v))
        elif c == "o":
            o.op = _lookup(v, OPS[:6], "op", 0)
        elif c == "d":
            o.datatype = _lookup(v, [t for t, _ in TYPES[:ntypes]], "type", 7)
        elif c == "J":
            o.output_file = v
        elif c in "ryTaRxDVMI":
            pass  # accepted; nothing the fake measures depends on them
        else:  # 'h' or '?'
            if c != "h":
                write_out("invalid option '%s'\n" % c)
            write_out(usage_text(layout, prog))
            return 0
    if o.min_bytes > o.max_bytes:
        write_err("invalid sizes for 'minbytes' and 'maxbytes': %d > %d\n" % (o.min_bytes, o.max_bytes))
        return 255
    return o


def _lookup(name: str, names: list[str], what: str, default: int) -> int:
    if name in names:
        return names.index(name)
    if name == "all":
        return -1
    write_out(f"invalid {what} {name}, defaulting to {names[default]} .. \n")
    return default
