"""Fake nccl-tests (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf) and fake
launchers (Open MPI's mpirun, Slurm's srun) for the simulated cluster.

Installed on a node by SimCluster.nccl() / fake_nccl_tests() (tests/harness/cluster.py): six /bin/sh
wrappers that run `python3 -I THIS NODE NODE_ADDRESS NET STATE_JSON MODE "$0" "$@"`, MODE being the
tool's name, so no environment variable is needed. Nothing of CUDA or NCCL is simulated: the tests
print what nccl-tests prints for the bandwidths STATE_JSON ($S/nccl.json) gives, and the launchers
start real processes on the other nodes.

* A perf tool alone is one process driving -g GPUs of its node. Under a launcher (the launcher puts
  NODECHECK_FAKE_NCCL_COORD=addr:port in the ranks' environment, with OMPI_COMM_WORLD_* or SLURM_*)
  every process connects to the launcher's coordinator over TCP from its node's address, registers,
  and every step (device report, NCCL init, each size) is a real barrier through the coordinator;
  only world rank 0 prints, as nccl-tests does.
* mpirun / srun start ONE agent per host (like orted): `ssh -F $S/ssh_config HOST mpirun
  --nodecheck-fake-agent` (no ssh for the launcher's own node), which forks the host's ranks with
  their environment, relays their stdout/stderr and exit codes back as JSON lines, and kills them
  when its ssh session (stdin) or the coordinator goes away.

Output follows the nccl-tests sources (NVIDIA/nccl-tests src/common.cu, src/util.cu): the 2.17.x
layout (tests_version < 2.18, no "unalign" in the parameter line) or the newest one (2.19.1,
"unalign: N"), shaped on the corpus recordings nccl-tests/olivia-gh200-slingshot-2.17.9-... and
nccl-tests/rtx6000d-2node-2.18.2-... ; -J FILE.json writes the newest JSON report (util.cu,
JSON_FILE_VERSION 2). NCCL's own "NCCL version" line follows NCCL's init.cc (showVersion).
The bandwidth model, the faults and the state schema: tests/harness/README.md, "nccl-tests".
"""
from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

AGENT_FLAG = "--nodecheck-fake-agent"
COORD_ENV = "NODECHECK_FAKE_NCCL_COORD"
HARD_CAP_S = 120                  # no fake process lives longer than this (never leak processes)
CURVE_BYTES = 16 << 20            # busbw(size) = plateau * size / (size + 16 MiB)
PERF_TOOLS = ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf")
LAUNCHERS = ("mpirun", "srun")
HANGS = ("start", "init", "sweep")

DEFAULTS: dict = {
    "net_busbw_gbs": 370.0, "nvlink_busbw_gbs": 480.0, "gpus_per_node": 8,
    "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_memory_bytes": 85520809984,
    "nccl_version": "2.29.2+cuda12.4", "tests_version": "2.17.9", "test_s": 0.3,
    "corrupt_from_bytes": 1 << 20, "hang_at_bytes": 1 << 20, "nodes": {},
}
NODE_KEYS = ("net_busbw_gbs", "nvlink_busbw_gbs", "corrupt", "corrupt_from_bytes", "hang",
             "hang_at_bytes", "nccl_version", "gpus", "gpu_model")
# PCI bus numbers of the 8 GPUs of an H100 HGX board, as the fake NVML states give them
BUS_IDS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")

# Line of `TESTCHECK(result);` in main() of src/common.cu: the " .. HOST pid N: Test failure
# common.cu:L" line every process prints when run() fails. Counted in the stored 2.17.x common.cu
# (the revision that goes with 2.17.9's common.h: JSON output, -M, 2.29 device API); the newer
# layout's file was not counted and reuses it.
MAIN_TESTCHECK_LINE = 1189


# ---- the state (nccl.json) ---------------------------------------------------------------------

def nccl_code(version: str) -> int:
    """NCCL_VERSION_CODE of "2.29.2+cuda12.4": 22902 (X*1000+Y*100+Z before 2.9)."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        return 0
    x, y, z = (int(g) for g in m.groups())
    return x * 10000 + y * 100 + z if (x > 2 or (x == 2 and y >= 9)) else x * 1000 + y * 100 + z


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


@dataclass(frozen=True)
class NodeSpec:
    name: str
    net_busbw_gbs: float
    nvlink_busbw_gbs: float
    gpus: int
    gpu_model: str
    nccl_version: str
    corrupt: bool
    corrupt_from_bytes: int
    hang: str | None
    hang_at_bytes: int


@dataclass(frozen=True)
class State:
    spec: dict

    @classmethod
    def load(cls, path: str) -> "State":
        try:
            with open(path) as f:
                spec = json.load(f)
        except (FileNotFoundError, ValueError):
            spec = {}
        return cls({**DEFAULTS, **spec})

    def node(self, name: str) -> NodeSpec:
        s, n = self.spec, self.spec["nodes"].get(name, {})
        hang = n.get("hang")
        return NodeSpec(name=name,
                        net_busbw_gbs=float(n.get("net_busbw_gbs", s["net_busbw_gbs"])),
                        nvlink_busbw_gbs=float(n.get("nvlink_busbw_gbs", s["nvlink_busbw_gbs"])),
                        gpus=int(n.get("gpus", s["gpus_per_node"])),
                        gpu_model=str(n.get("gpu_model", s["gpu_model"])),
                        nccl_version=str(n.get("nccl_version", s["nccl_version"])),
                        corrupt=bool(n.get("corrupt", False)),
                        corrupt_from_bytes=int(n.get("corrupt_from_bytes", s["corrupt_from_bytes"])),
                        hang=hang if hang in HANGS else None,
                        hang_at_bytes=int(n.get("hang_at_bytes", s["hang_at_bytes"])))

    @property
    def tests_version(self) -> str:
        return str(self.spec["tests_version"])

    @property
    def layout(self) -> str:
        """"2.17": the 2.17.x output (no unalign); "newest": 2.18 and later (2.19.1's sources)."""
        return "2.17" if version_tuple(self.tests_version) < (2, 18) else "newest"


@dataclass(frozen=True)
class Ctx:
    node: str
    address: str
    net: str
    state_path: str
    state: State

    @property
    def ssh_config(self) -> str:
        return os.path.join(os.path.dirname(self.state_path), "ssh_config")

    def resolve(self, host: str) -> str:
        """nodeK -> its address (the simulated cluster has no DNS); anything else as given."""
        m = re.fullmatch(r"node([1-9]\d*)", host)
        return f"{self.net}.{m.group(1)}" if m else host

    def is_me(self, host: str) -> bool:
        return host in (self.node, self.address, "localhost", "127.0.0.1") or \
            self.resolve(host) == self.address


def die_with_parent() -> None:
    """SIGKILL when the parent (agent) dies: a rank never outlives the process that started it."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)    # PR_SET_PDEATHSIG
    except Exception:                                                # pragma: no cover
        pass


def write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def write_err(text: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(text)
    sys.stderr.flush()


# ---- getopt_long, as glibc does it ---------------------------------------------------------------

def getopt_long(prog: str, args: list[str], shortopts: str, longopts: list[tuple[str, bool, str]]):
    """Yield (option char, value) in order; on an error glibc's message goes to stderr and '?' is
    yielded (nccl-tests then prints its usage). Non-options are skipped (glibc permutes them)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return
        if a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            cands = [lo for lo in longopts if lo[0] == name] or \
                [lo for lo in longopts if lo[0].startswith(name)]
            if not cands:
                write_err(f"{prog}: unrecognized option '{a}'\n")
                yield "?", None
                return
            if len(cands) > 1:
                write_err(f"{prog}: option '{a}' is ambiguous; possibilities:"
                          + "".join(f" '--{c[0]}'" for c in cands) + "\n")
                yield "?", None
                return
            lname, has_arg, ch = cands[0]
            if has_arg and not eq:
                if i + 1 >= len(args):
                    write_err(f"{prog}: option '--{lname}' requires an argument\n")
                    yield "?", None
                    return
                i, val = i + 1, args[i + 1]
            elif not has_arg and eq:
                write_err(f"{prog}: option '--{lname}' doesn't allow an argument\n")
                yield "?", None
                return
            yield ch, (val if has_arg else None)
        elif a.startswith("-") and a != "-":
            j = 1
            while j < len(a):
                c = a[j]
                k = shortopts.find(c)
                if k < 0 or c == ":":
                    write_err(f"{prog}: invalid option -- '{c}'\n")
                    yield "?", None
                    return
                if shortopts[k + 1:k + 2] == ":":
                    if j + 1 < len(a):
                        val = a[j + 1:]
                    elif i + 1 < len(args):
                        i, val = i + 1, args[i + 1]
                    else:
                        write_err(f"{prog}: option requires an argument -- '{c}'\n")
                        yield "?", None
                        return
                    yield c, val
                    break
                yield c, None
                j += 1
        i += 1


def strtol(text: str) -> int:
    """C's strtol(s, NULL, 0): optional sign, 0x / 0 prefixes, stops at the first bad digit."""
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if not m:
        return 0
    digits = m.group(2)
    value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8) if digits.startswith("0") \
        else int(digits)
    return -value if m.group(1) == "-" else value


def parsesize(text: str) -> float:
    """common.cu parsesize: sscanf("%lf %1s"): a number, then K/M/G (binary); else -1."""
    m = re.match(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(\S?)", text)
    if not m:
        return -1.0
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(m.group(2).lower())
    return -1.0 if units is None else float(m.group(1)) * units


# ---- nccl-tests options ----------------------------------------------------------------------------

LONG_217 = [("nthreads", True, "t"), ("ngpus", True, "g"), ("minbytes", True, "b"), ("maxbytes", True, "e"),
            ("stepbytes", True, "i"), ("stepfactor", True, "f"), ("iters", True, "n"),
            ("agg_iters", True, "m"), ("warmup_iters", True, "w"), ("run_cycles", True, "N"),
            ("parallel_init", True, "p"), ("check", True, "c"), ("op", True, "o"), ("datatype", True, "d"),
            ("root", True, "r"), ("blocking", True, "z"), ("stream_null", True, "y"), ("timeout", True, "T"),
            ("cudagraph", True, "G"), ("report_cputime", True, "C"), ("report_timestamps", True, "S"),
            ("output_file", True, "J"), ("average", True, "a"), ("local_register", True, "R"),
            ("cta_policy", True, "x"), ("device_implementation", True, "D"), ("device_cta_count", True, "V"),
            ("memory", True, "M")]
OPTIONS = {
    "2.17": ("t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:", LONG_217 + [("help", False, "h")]),
    "newest": ("t:g:b:e:i:f:n:m:w:N:p:I:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:",
               LONG_217 + [("unalign", True, "u"), ("per_iter_timing", True, "I"), ("help", False, "h")]),
}
_USAGE_HEAD = ["[-t,--nthreads <num threads>] ", "[-g,--ngpus <gpus per thread>] ",
               "[-b,--minbytes <min size in bytes>] ", "[-e,--maxbytes <max size in bytes>] ",
               "[-i,--stepbytes <increment size>] ", "[-f,--stepfactor <increment factor>] ",
               "[-n,--iters <iteration count>] ", "[-m,--agg_iters <aggregated iteration count>] ",
               "[-w,--warmup_iters <warmup iteration count>] ",
               "[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] ",
               "[-p,--parallel_init <0/1>] ", "[-c,--check <check iteration count>] ",
               "[-o,--op <sum/prod/min/max/avg/mulsum/all>] ", "[-d,--datatype <nccltype/all>] ",
               "[-r,--root <root>] "]
_USAGE_MID = ["[-y,--stream_null <0/1>] ", "[-T,--timeout <time in seconds>] ",
              "[-G,--cudagraph <num graph launches>] ", "[-C,--report_cputime <0/1>] ",
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
              "[-V,--device_cta_count <number> set number of CTAs for device implementation (default: 16)] "]
USAGE = {   # the printf of common.cu's default: case, "\n\t" between the entries
    "2.17": _USAGE_HEAD + ["[-z,--blocking <0/1>] "] + _USAGE_MID
    + ["[-M,--memory_report <0/1> enable memory usage report (default: 0)] ", "[-h,--help]"],
    "newest": _USAGE_HEAD
    + ["[-z,--blocking <0/1/2> 1=wait for completion and barrier (default behavior), 2=wait without barrier] "]
    + _USAGE_MID + ["[-M,--memory <0/1> enable memory usage report (default: 0)] ",
                    "[-u,--unalign <index of first element> Misalign source and destination buffers (default: 0)] ",
                    "[-I,--per_iter_timing <0/1> per-iteration CUDA event timing\n\t"
                    "    (best with -z 0 or -z 2; with -z 1 includes barrier wait;\n\t"
                    "    i_p99 uses nearest-rank percentile and may equal i_max\n\t"
                    "    with <100 samples) (default: 0)] ", "[-h,--help]"],
}
TYPES = [("int8", 1), ("uint8", 1), ("int32", 4), ("uint32", 4), ("int64", 8), ("uint64", 8), ("half", 2),
         ("float", 4), ("double", 8), ("bfloat16", 2), ("f8e4m3", 1), ("f8e5m2", 1)]
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
    op: int = 0                       # index into OPS; -1 = all
    datatype: int = 7                 # index into TYPES (float); -1 = all
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
                write_err("invalid size specified for '%s'\n" % {"b": "minbytes", "e": "maxbytes",
                                                                   "i": "stepBytes"}[c])
                return 255
            setattr(o, {"b": "min_bytes", "e": "max_bytes", "i": "step_bytes"}[c], int(parsed))
        elif c in "tgfnmwNpczGCSu" and len(c) == 1:
            attr = {"t": "nthreads", "g": "ngpus", "f": "step_factor", "n": "iters", "m": "agg_iters",
                    "w": "warmup_iters", "N": "run_cycles", "p": "parallel_init", "c": "check", "z": "blocking",
                    "G": "graph", "C": "cputime", "S": "timestamps", "u": "unalign"}[c]
            setattr(o, attr, strtol(v))
        elif c == "o":
            o.op = _lookup(v, OPS[:6], "op", 0)
        elif c == "d":
            o.datatype = _lookup(v, [t for t, _ in TYPES[:ntypes]], "type", 7)
        elif c == "J":
            o.output_file = v
        elif c in "ryTaRxDVMI":
            pass                        # accepted; nothing the fake measures depends on them
        else:                           # 'h' or '?'
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


# ---- formatting (src/util.cu) ----------------------------------------------------------------------

def float_str(value: float, width: int) -> str:
    """getFloatStr: 2 decimals while they fit, then 1, then 0, then an exponent."""
    power, val = 0, 1
    while value >= val and power < 40:
        power, val = power + 1, val * 10
    if power < width - 2:
        return "%*.2f" % (width, value)
    if power < width - 1:
        return "%*.1f" % (width, value)
    if power < width + 1:
        return "%*.0f" % (width, value)
    return "%*.1e" % (width, value)


def params_line(layout: str, o: Options) -> str:
    step = o.step_factor if o.step_factor > 1 else o.step_bytes
    line = ("# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d "
            "agg iters: %d validation: %d graph: %d" % (o.nthreads, o.ngpus, o.min_bytes, o.max_bytes, step,
                                                        "factor" if o.step_factor > 1 else "bytes",
                                                        o.warmup_iters, o.iters, o.agg_iters, o.check, o.graph))
    if layout != "2.17":
        line += " unalign: %d" % o.unalign
    return line + "\n"


def header_lines(o: Options) -> str:
    """writeResultHeader (without -I)."""
    t = "cputime" if o.cputime else "time"
    pad, lbl, fmt = (19, "timestamp", "%Y-%m-%d %H:%M:%S") if o.timestamps else (0, "", "")
    cols = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
    return ("#\n"
            + "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n"
            % ("", "", "", "", "")
            + cols % ("size", "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw",
                      "busbw", "#wrong", pad, lbl)
            + cols % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                      "(GB/s)", "", pad, fmt))


def rank_line(rank: int, pid: int, host: str, dev: int, model: str) -> str:
    bus = BUS_IDS[dev] if dev < len(BUS_IDS) else "%02x" % (0x10 + 0x10 * dev)
    return "#  Rank %2d Group %2d Pid %6d on %10s device %2d [0000:%s:00] %s\n" % (rank, 0, pid, host, dev,
                                                                                   bus, model)


class JsonReport:
    """util.cu's hand-written JSON (jsonKey/jsonStr/...): compact, doubles as %lf, booleans as the
    strings "true"/"false", '/' escaped, a string cut at the first non-printable character."""

    def __init__(self, fp) -> None:
        self.fp, self.states = fp, []

    @staticmethod
    def sanitize(text: str) -> str:
        out = []
        for ch in text:
            if ch in '"\\/':
                out.append("\\" + ch)
            elif ch == "\t":
                out.append("\\t")
            elif ch == "\n":
                out.append("\\n")
            elif ord(ch) >= 0x7F or ord(ch) <= 0x1F:
                break
            else:
                out.append(ch)
        return "".join(out)

    def _value(self) -> None:
        top = self.states[-1] if self.states else None
        if top == "list_empty":
            self.states[-1] = "list_some"
        elif top == "list_some":
            self.fp.write(",")
        elif top == "key":
            self.states.pop()

    def key(self, name: str) -> "JsonReport":
        if self.states[-1] == "object_empty":
            self.states[-1] = "object_some"
        else:
            self.fp.write(",")
        self.fp.write('"%s":' % self.sanitize(name))
        self.states.append("key")
        return self

    def start_object(self) -> None:
        self._value()
        self.fp.write("{")
        self.states.append("object_empty")

    def start_list(self) -> None:
        self._value()
        self.fp.write("[")
        self.states.append("list_empty")

    def finish(self) -> None:
        """jsonFinishCurrent: close the innermost object or list (a dangling key gets null)."""
        top = self.states.pop()
        if top == "key":
            self.fp.write("null")
        else:
            self.fp.write("}" if top.startswith("object") else "]")

    def null(self) -> None:
        self._value()
        self.fp.write("null")

    def str_(self, text: str | None) -> None:
        if text is None:
            return self.null()
        self._value()
        self.fp.write('"%s"' % self.sanitize(text))

    def bool_(self, flag: bool) -> None:
        self.str_("true" if flag else "false")

    def int_(self, value: int) -> None:
        self._value()
        self.fp.write("%d" % value)

    def double(self, value: float) -> None:
        self._value()
        self.fp.write('"nan"' if value != value else "%f" % value)

    @classmethod
    def open(cls, path: str | None, argv: list[str], nccl_version: int) -> "JsonReport | None":
        """jsonOutputInit, for a path ending in .json (classifyOutputFile); else no report at all."""
        if not path or not re.search(r"\.[^./]+$", path) or not path.lower().endswith(".json"):
            return None
        try_path, n = path, 0
        while True:
            try:
                fp = open(try_path, "x")
                break
            except FileExistsError:
                try_path, n = f"{path}.{n}", n + 1
            except OSError:
                write_out(f"# skipping json output; {try_path} not accessible\n")
                return None
        write_out(f"# Writing JSON output to {try_path}\n")
        r = cls(fp)
        r.start_object()
        r.key("version").int_(2)
        r.key("start_time").str_(time.strftime("%Y-%m-%d %H:%M:%S"))
        r.key("args").start_list()
        for a in argv:
            r.str_(a)
        r.finish()
        r.key("env").start_list()
        for k, v in os.environ.items():
            r.str_(f"{k}={v}")
        r.finish()
        r.key("nccl_version").int_(nccl_version)
        return r

    def close(self) -> None:
        """jsonOutputFinalize (version 2): end_time at top level, then close whatever is open."""
        if len(self.states) == 1 and self.states[0].startswith("object"):
            self.key("end_time").str_(time.strftime("%Y-%m-%d %H:%M:%S"))
        while self.states:
            self.finish()
        self.fp.close()


# ---- the collectives -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Collective:
    name: str            # program name
    reduces: bool        # has a reduction op (all_reduce, reduce_scatter); others print "none"

    def counts(self, size: int, elt: int, nranks: int) -> tuple[int, int]:
        """(bytes printed, count printed) of one step: getCollByteCount + max(send, recv) bytes."""
        count = size // elt
        if self.name == "all_reduce_perf":
            return count * elt, count
        base = (count // nranks) & -(16 // elt)
        return base * nranks * elt, base

    def factor(self, nranks: int, env: dict) -> float:
        """busbw / algbw (all_reduce.cu, all_gather.cu, reduce_scatter.cu, alltoall.cu getBw)."""
        if self.name == "all_reduce_perf":
            if env.get("NCCL_ALGO") in ("NVLS", "NVLSTREE"):
                return (nranks - 1) / (nranks + 1)
            return 2 * (nranks - 1) / nranks
        return (nranks - 1) / nranks


COLLECTIVES = {n: Collective(n, n in ("all_reduce_perf", "reduce_scatter_perf")) for n in PERF_TOOLS}


def step_sizes(o: Options) -> list[int]:
    sizes, size = [], o.min_bytes
    while size <= o.max_bytes and len(sizes) < 4096:
        sizes.append(size)
        nxt = size * o.step_factor if o.step_factor > 1 else size + o.step_bytes
        if nxt <= size:
            break
        size = nxt
    return sizes


def curve(plateau: float, size: int, factor: float) -> tuple[float, float, float]:
    """(time us, algbw, busbw): busbw = plateau*S/(S+16MiB), algbw = busbw/factor, time = S/algbw/1e3."""
    shape = size / (size + CURVE_BYTES)
    if factor <= 0:                                   # one rank: nothing crosses a bus
        algbw = plateau * shape
        return (size + CURVE_BYTES) / plateau / 1e3, algbw, 0.0
    busbw = plateau * shape
    return factor * (size + CURVE_BYTES) / plateau / 1e3, busbw / factor, busbw


# ---- the link to the launcher's coordinator --------------------------------------------------------

class Link:
    """This process's connection to the coordinator: hello -> registry, then barriers (each one a
    gather of one value per process)."""

    def __init__(self, coord: str, my_address: str, proc: int, nprocs: int) -> None:
        self.proc, self.nprocs = proc, nprocs
        host, _, port = coord.rpartition(":")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.bind((my_address, 0))
            self.sock.connect((host, int(port)))
        except OSError:
            write_err(f"fake nccl-tests: cannot reach the launcher at {coord}\n")
            os._exit(1)
        self.rfile = self.sock.makefile("rb")

    def send(self, obj: dict) -> None:
        try:
            self.sock.sendall(json.dumps(obj).encode() + b"\n")
        except OSError:
            self.lost()

    def recv(self) -> dict:
        try:
            line = self.rfile.readline()
        except OSError:
            line = b""
        if not line:
            self.lost()
        return json.loads(line)

    def lost(self) -> None:
        """The launcher went away (or aborted the job): end quietly, as a killed rank would."""
        sys.stdout.flush()
        os._exit(1)

    def hello(self, info: dict) -> list[dict]:
        self.send({"op": "hello", "proc": self.proc, **info})
        return self.recv()["procs"]

    def barrier(self, tag: str, value=None) -> list:
        self.send({"op": "barrier", "proc": self.proc, "tag": tag, "value": value})
        return self.recv()["values"]

    def bye(self) -> None:
        self.send({"op": "bye", "proc": self.proc})
        self.sock.close()

    def wait_closed(self) -> None:
        try:
            while self.sock.recv(4096):
                pass
        except OSError:
            pass


def hang(link: Link | None) -> None:
    """A hung rank: it waits until its coordinator connection closes (or the hard cap), then exits."""
    sys.stdout.flush()
    if link is not None:
        link.wait_closed()
    else:
        time.sleep(HARD_CAP_S)
    os._exit(1)


# ---- one nccl-tests process ------------------------------------------------------------------------

def launcher_env() -> tuple[str | None, int, int]:
    """(coordinator, this process's world rank, world size) from the launcher's environment."""
    coord = os.environ.get(COORD_ENV)
    if not coord:
        return None, 0, 1
    for rank_var, size_var in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if rank_var in os.environ and size_var in os.environ:
            return coord, int(os.environ[rank_var]), int(os.environ[size_var])
    return None, 0, 1


def nccl_debug_level() -> int:
    """NCCL_DEBUG: NONE 0, VERSION 1, WARN 2, INFO 3, ABORT 4, TRACE 5."""
    return {"VERSION": 1, "WARN": 2, "INFO": 3, "ABORT": 4, "TRACE": 5}.get(
        os.environ.get("NCCL_DEBUG", "").upper(), 0)


def perf_main(ctx: Ctx, tool: str, argv0: str, args: list[str]) -> int:
    """main() and run() of nccl-tests' common.cu for one process, phase by phase; each phase that
    needs every process is a barrier through the launcher's coordinator (none when alone)."""
    me = ctx.state.node(ctx.node)
    lib_code = nccl_code(me.nccl_version)
    ntypes = 12 if lib_code >= 22400 else 10 if lib_code >= 21000 else 9      # fp8 from 2.24, bf16 2.10
    parsed = parse_options(ctx.state.layout, argv0, args, ntypes)
    if isinstance(parsed, int):
        return parsed
    coord, proc, nprocs = launcher_env()
    if coord:
        die_with_parent()
        if os.getppid() == 1:
            return 1
    run = PerfRun(ctx, me, COLLECTIVES[tool], parsed, proc, lib_code, ntypes)
    run.report = JsonReport.open(parsed.output_file, [argv0, *args], lib_code) if proc == 0 else None
    run.print_header()
    if me.hang == "start":                    # the node's processes never join
        hang(None)
    run.link = Link(coord, ctx.address, proc, nprocs) if coord else None
    if not run.device_report():
        return trace_failure(ctx, 5)          # writeDeviceReport's testNotImplemented
    run.nccl_init()
    errors, bw_failed = run.sweep()
    if errors or bw_failed:
        return trace_failure(ctx, 7)          # run() returns testNumResults
    return 0


class PerfRun:
    def __init__(self, ctx: Ctx, me: NodeSpec, coll: Collective, o: Options, proc: int, lib_code: int,
                 ntypes: int) -> None:
        self.ctx, self.me, self.coll, self.o, self.proc = ctx, me, coll, o, proc
        self.lib_code, self.ntypes = lib_code, ntypes
        self.pid = os.getpid()
        self.report: JsonReport | None = None
        self.link: Link | None = None
        self.procs: list[dict] = []
        self.first_dev = 0

    def say(self, text: str) -> None:
        """PRINT: only the main thread of process 0 prints."""
        if self.proc == 0:
            write_out(text)

    def barrier(self, tag: str, value=None) -> list:
        return self.link.barrier(tag, value) if self.link else [value]

    def print_header(self) -> None:
        o, state = self.o, self.ctx.state
        self.say("# nccl-tests version %s nccl-headers=%d nccl-library=%d\n"
                 % (state.tests_version, nccl_code(state.spec["nccl_version"]), self.lib_code))
        self.say("# Collective test starting: %s\n" % self.coll.name)
        self.say(params_line(state.layout, o))
        if o.blocking == 1 or (o.blocking and state.layout == "2.17"):
            self.say("# Blocking Enabled: wait for completion and barrier after each collective \n")
        elif o.blocking > 1:
            self.say("# Blocking Enabled: wait for completion after each collective (no barrier) \n")
        if o.parallel_init:
            self.say("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n")

    def device_report(self) -> bool:
        """The rendezvous, then every process's rank lines, printed by process 0 (MPI_Gather).
        False: this process asked for more GPUs than its node has."""
        o = self.o
        info = {"host": self.ctx.node, "pid": self.pid, "nthreads": o.nthreads, "ngpus": o.ngpus}
        self.procs = self.link.hello(info) if self.link else [{"proc": 0, **info}]
        self.say("#\n")
        if self.report:
            self._json_config()
        self.say("# Using devices\n")
        per_proc = o.nthreads * o.ngpus
        local_rank = sum(1 for p in self.procs if p["host"] == self.ctx.node and p["proc"] < self.proc)
        gpu0 = os.environ.get("NCCL_TESTS_DEVICE", "")
        self.first_dev = int(gpu0) if gpu0.isdigit() else local_rank * per_proc
        if self.first_dev + per_proc > self.me.gpus:
            write_err("Invalid number of GPUs: %d requested but only %d were found.\n"
                      % (self.first_dev + per_proc, self.me.gpus))
            write_err("Please check the number of processes and GPUs per process.\n")
            return False
        lines = [rank_line(self.proc * per_proc + i, self.pid, self.ctx.node, self.first_dev + i, self.me.gpu_model)
                 for i in range(per_proc)]
        every = self.barrier("devices", lines)
        for proc_lines in every:
            self.say("".join(proc_lines))
        if self.report:
            self._json_devices(every)
        return True

    def nccl_init(self) -> None:
        """run() after the device report: the memory limit, then NCCL's communicator init, where
        NCCL prints its version (init.cc showVersion: NCCL_DEBUG=VERSION or WARN the plain line,
        rank 0's process only; INFO and up an INFO line from every process)."""
        o = self.o
        gib = 1 << 30
        mem = int(self.ctx.state.spec["gpu_memory_bytes"])
        mem_max = (mem - min(-(-mem // (16 * gib)) * gib, 4 * gib) - gib) // (3 if o.check else 2)
        if o.max_bytes > mem_max:
            o.max_bytes = mem_max
            o.min_bytes = min(o.min_bytes, o.max_bytes)
            self.say("#\n# Reducing maxBytes to %d due to memory limitation\n" % o.max_bytes)
        level, version = nccl_debug_level(), "NCCL version " + self.me.nccl_version
        if level > 2:
            write_out("%s:%d:%d [%d] NCCL INFO %s\n" % (self.ctx.node, self.pid, self.pid, self.first_dev, version))
        elif level and self.proc == 0:
            write_out(version + "\n")
        if self.me.hang == "init":
            hang(self.link)
        self.barrier("init")

    def plateau(self) -> float:
        """Bus bandwidth the run reaches for large sizes: the slowest node's network when the run
        crosses nodes; else the node's NVLink, or its network with P2P and SHM switched off."""
        nodes = [self.ctx.state.node(h) for h in sorted({p["host"] for p in self.procs})]
        if len(nodes) > 1:
            return min(n.net_busbw_gbs for n in nodes)
        if os.environ.get("NCCL_P2P_DISABLE") == "1" and os.environ.get("NCCL_SHM_DISABLE") == "1":
            return self.me.net_busbw_gbs
        return self.me.nvlink_busbw_gbs

    def sweep(self) -> tuple[int, bool]:
        """The table, one barrier per row, and the summary. (errors of all processes, avg bw failed)."""
        o, coll = self.o, self.coll
        nranks = sum(p["nthreads"] * p["ngpus"] for p in self.procs)
        plateau, factor = self.plateau(), coll.factor(nranks, dict(os.environ))
        nodes = [self.ctx.state.node(h) for h in {p["host"] for p in self.procs}]
        corrupt_from = min((n.corrupt_from_bytes for n in nodes if n.corrupt), default=None)
        self.say(header_lines(o))
        if self.report:
            self.report.key("results").start_list()
        types = range(self.ntypes) if o.datatype == -1 else [o.datatype]
        ops = [None] if not coll.reduces else (range(len(OPS)) if o.op == -1 else [o.op])
        cycles = o.run_cycles if o.run_cycles > 0 else 1000
        steps = [(t, op, size) for _ in range(cycles) for t in types for op in ops for size in step_sizes(o)]
        dt = float(self.ctx.state.spec["test_s"]) / max(1, len(steps))
        errors, bw = 0, []
        for k, (t, op, size) in enumerate(steps):
            time.sleep(dt)
            if self.me.hang == "sweep" and size >= self.me.hang_at_bytes:
                hang(self.link)
            self.barrier(f"s{k}")
            type_name, elt = TYPES[t]
            nbytes, count = coll.counts(size, elt, nranks)
            usec, algbw, busbw = curve(plateau, nbytes, factor)
            wrong = nbytes // elt // 1000 + 1 if corrupt_from is not None and nbytes >= corrupt_from else 0
            # alltoall does not check its in-place run (alltoall.cu: reportErrors = in_place ? 0 : 1)
            checked = [bool(o.check), bool(o.check) and coll.name != "alltoall_perf"]
            self.say(self._row(nbytes, count, type_name, OPS[op] if op is not None else "none", usec, algbw, busbw,
                               wrong, checked))
            errors += sum(1 for c in checked if c and wrong)
            bw += [busbw, busbw]
        total_errors = sum(self.barrier("done", errors))          # MPI_Allreduce of errors
        avg = sum(bw) / len(bw) if bw else float("nan")
        min_bw = os.environ.get("NCCL_TESTS_MIN_BW")
        check_avg = float(min_bw) if min_bw else -1.0
        bw_failed = check_avg != -1 and avg < check_avg * 0.9
        self.say("# %-20s : %d %s\n" % ("Out of bounds values", total_errors, "FAILED" if total_errors else "OK"))
        self.say("# %-20s : %g %s\n" % ("Avg bus bandwidth", avg,
                                         "" if check_avg == -1 else "FAILED" if bw_failed else "OK"))
        self.say("#\n# Collective test concluded: %s\n" % coll.name)
        self.say("#\n")                      # finalizeFooter
        self.say("\n")                       # writeErrors: ncclGetLastError() is ""
        if self.report:
            self._json_footer(total_errors, avg, check_avg, bw_failed)
        if self.link:
            self.link.bye()
        return total_errors, bw_failed

    def _row(self, nbytes: int, count: int, type_name: str, op_name: str, usec: float, algbw: float,
             busbw: float, wrong: int, checked: list[bool]) -> str:
        """writeBenchmarkLinePreamble + writeBenchmarkLineBody (out of place, in place)."""
        r = self.report
        row = "%12d  %12d  %8s  %6s  %6s" % (nbytes, count, type_name, op_name, "%6i" % -1)
        if r:
            r.start_object()
            for k, v in (("size", nbytes), ("count", count)):
                r.key(k).int_(v)
            for k, v in (("type", type_name), ("redop", op_name), ("root", "%6i" % -1)):
                r.key(k).str_(v)
        for in_place, check in enumerate(checked):
            cols = (float_str(usec, 7), float_str(algbw, 6), float_str(busbw, 6))
            row += "  %7s  %6s  %6s  %6g" % (*cols, wrong) if check else "  %7s  %6s  %6s    N/A" % cols
            if in_place and self.o.timestamps:
                row += "%21s" % time.strftime("%Y-%m-%d %H:%M:%S")
            if r:
                r.key("in_place" if in_place else "out_of_place").start_object()
                r.key("cpu_time" if self.o.cputime else "time").double(usec)
                r.key("alg_bw").double(algbw)
                r.key("bus_bw").double(busbw)
                if check:
                    r.key("nwrong").double(float(wrong))
                else:
                    r.key("nwrong").null()
                r.finish()
        if r:
            r.key("actual_iterations").int_(self.o.iters)
            r.key("experiment_name").str_("")
            r.finish()
        return row + "\n"

    def _json_config(self) -> None:
        o, r = self.o, self.report
        r.key("config").start_object()
        for k, v in (("nthreads", o.nthreads), ("ngpus", o.ngpus), ("minimum_bytes", o.min_bytes),
                     ("maximum_bytes", o.max_bytes)):
            r.key(k).int_(v)
        if o.step_factor > 1:
            r.key("step_factor").int_(o.step_factor)
        else:
            r.key("step_bytes").int_(o.step_bytes)
        for k, v in (("warmup_iters", o.warmup_iters), ("iterations", o.iters), ("aggregated_iterations", o.agg_iters),
                     ("validation", o.check), ("graph", o.graph)):
            r.key(k).int_(v)
        r.key("blocking_collectives").bool_(bool(o.blocking))
        r.key("per_iter_timing").bool_(False)
        r.key("parallel_init").bool_(bool(o.parallel_init))

    def _json_devices(self, every: list[list[str]]) -> None:
        """util.cu parseRankInfo reads the FIRST rank line of each process only."""
        r = self.report
        r.key("devices").start_list()
        for proc_lines in every:
            m = re.match(r"#  Rank +(\d+) Group +(\d+) Pid +(\d+) on +(\S+) device +(\d+) \[([^]]*)\] (.*)\n",
                         proc_lines[0])
            if m:
                r.start_object()
                for k, v in zip(("rank", "group", "pid"), m.groups()[:3]):
                    r.key(k).int_(int(v))
                r.key("hostname").str_(m.group(4))
                r.key("device").int_(int(m.group(5)))
                r.key("device_hex").str_(m.group(6))
                r.key("device_info").str_(m.group(7))
                r.finish()
        r.finish()
        r.finish()                            # config

    def _json_footer(self, errors: int, avg: float, check_avg: float, bw_failed: bool) -> None:
        """writeResultFooter, writeErrors, jsonOutputFinalize."""
        r = self.report
        r.finish()                            # results
        r.key("out_of_bounds").start_object()
        r.key("count").int_(errors)
        r.key("okay").bool_(errors == 0)
        r.finish()
        r.key("average_bus_bandwidth").start_object()
        r.key("bandwidth").double(avg)
        if check_avg == -1:
            r.key("okay").str_("unchecked")
        else:
            r.key("okay").bool_(not bw_failed)
        r.finish()
        r.key("errors").start_list()
        r.str_("")
        r.finish()
        r.close()


def trace_failure(ctx: Ctx, code: int) -> int:
    """main(): TESTCHECK(result) traces the failure on stdout, then main returns the code."""
    write_out(" .. %s pid %d: Test failure %s:%d\n" % (ctx.node, os.getpid(), "common.cu", MAIN_TESTCHECK_LINE))
    return code


# ---- the launchers' side: coordinator, agents, relay ------------------------------------------------

class Coordinator:
    """The rendezvous the ranks of one job meet at (what MPI's runtime does for nccl-tests)."""

    def __init__(self, address: str, nprocs: int, abort_on_loss: bool) -> None:
        self.nprocs, self.abort_on_loss = nprocs, abort_on_loss
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind((address, 0))
        self.listener.listen(512)
        self.address = "%s:%d" % self.listener.getsockname()
        self.lock = threading.Lock()
        self.hellos: dict[int, dict] = {}
        self.conns: dict[int, tuple[socket.socket, threading.Lock]] = {}
        self.barriers: dict[str, dict[int, object]] = {}
        self.finished: set[int] = set()
        self.agents: set[socket.socket] = set()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _send(self, proc: int, obj: dict) -> None:
        sock, lock = self.conns[proc]
        with lock:
            try:
                sock.sendall(json.dumps(obj).encode() + b"\n")
            except OSError:
                pass

    def _serve(self, conn: socket.socket) -> None:
        proc = None
        rfile = conn.makefile("rb")
        try:
            for line in rfile:
                msg = json.loads(line)
                op = msg.get("op")
                if op == "agent":
                    with self.lock:
                        self.agents.add(conn)
                    continue
                proc = msg["proc"]
                with self.lock:
                    if op == "hello":
                        self.conns[proc] = (conn, threading.Lock())
                        self.hellos[proc] = msg
                        if len(self.hellos) == self.nprocs:
                            registry = {"procs": [self.hellos[p] for p in sorted(self.hellos)]}
                            for p in self.conns:
                                self._send(p, registry)
                    elif op == "barrier":
                        waiting = self.barriers.setdefault(msg["tag"], {})
                        waiting[proc] = msg.get("value")
                        if len(waiting) == self.nprocs:
                            go = {"op": "go", "tag": msg["tag"], "values": [waiting[p] for p in sorted(waiting)]}
                            del self.barriers[msg["tag"]]
                            for p in self.conns:
                                self._send(p, go)
                    elif op == "bye":
                        self.finished.add(proc)
        except (OSError, ValueError, KeyError):
            pass
        finally:
            with self.lock:
                self.agents.discard(conn)
                lost = proc is not None and proc not in self.finished and not self.closed
            conn.close()
            if lost and self.abort_on_loss:
                self.close_ranks()

    def close_ranks(self) -> None:
        """Drop every rank's connection: ranks waiting on a barrier (or hung) exit."""
        with self.lock:
            self.closed = True
            conns = [c for c, _ in self.conns.values()]
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def agents_gone(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            with self.lock:
                if not self.agents:
                    return
            time.sleep(0.01)

    def close(self) -> None:
        self.close_ranks()
        try:
            self.listener.close()
        except OSError:
            pass


@dataclass
class RankPlan:
    rank: int
    host: str
    env: dict[str, str]


@dataclass
class AgentHandle:
    host: str
    ranks: list[int]
    proc: subprocess.Popen
    ready: bool = False
    readers: list[threading.Thread] = field(default_factory=list)


@dataclass
class JobResult:
    exits: dict[int, int] = field(default_factory=dict)
    daemon_failed: tuple[str, int] | None = None      # (host, the ssh exit code)
    lost_daemon: str | None = None
    signalled: int = 0
    first_bad: tuple[int, int] | None = None          # (rank, exit code) of the first failing rank


class Job:
    """One launch: an agent per host, a coordinator, the relay of every rank's output."""

    def __init__(self, ctx: Ctx, mode: str, plan: list[RankPlan], argv: list[str], inherit_env: bool,
                 prefix, stop_on_failure: bool, cwd: str | None = None) -> None:
        self.ctx, self.mode, self.plan, self.argv = ctx, mode, plan, argv
        self.cwd = cwd or os.getcwd()
        self.inherit_env, self.prefix, self.stop_on_failure = inherit_env, prefix, stop_on_failure
        self.events: list[tuple] = []
        self.cv = threading.Condition()
        self.agents: list[AgentHandle] = []
        self.signalled = 0
        self.partial: dict[tuple[int, int], bytes] = {}
        self.out_lock = threading.Lock()

    # events from the reader threads
    def _post(self, *event) -> None:
        with self.cv:
            self.events.append(event)
            self.cv.notify()

    def _next(self, timeout: float):
        with self.cv:
            if not self.events:
                self.cv.wait(timeout)
            return self.events.pop(0) if self.events else None

    def _read_agent(self, a: AgentHandle) -> None:
        for line in a.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "ready" in msg:
                self._post("ready", a)
            elif "exit" in msg:
                self._post("exit", msg["r"], msg["exit"])
            else:
                self._post("out", msg["r"], msg["fd"], base64.b64decode(msg["b"]))
        self._post("eof", a)

    def _read_stderr(self, a: AgentHandle) -> None:
        for chunk in iter(lambda: a.proc.stderr.read1(65536), b""):
            self._write(2, chunk)

    def _write(self, fd: int, data: bytes) -> None:
        with self.out_lock:
            stream = sys.stdout.buffer if fd == 1 else sys.stderr.buffer
            try:
                stream.write(data)
                stream.flush()
            except OSError:
                pass

    def _relay(self, rank: int, fd: int, data: bytes, final: bool = False) -> None:
        if self.prefix is None:
            if data:
                self._write(fd, data)
            return
        buf = self.partial.pop((rank, fd), b"") + data
        *lines, rest = buf.split(b"\n")
        out = b"".join(self.prefix(rank, fd) + ln + b"\n" for ln in lines)
        if final and rest:
            out += self.prefix(rank, fd) + rest + b"\n"
        elif rest:
            self.partial[(rank, fd)] = rest
        if out:
            self._write(fd, out)

    def _spawn(self, host: str, ranks: list[RankPlan]) -> AgentHandle:
        if self.ctx.is_me(host):
            cmd = [sys.executable, "-I", os.path.abspath(__file__), self.ctx.node, self.ctx.address, self.ctx.net,
                   self.ctx.state_path, self.mode, self.mode, AGENT_FLAG]
        else:
            cmd = ["ssh", "-F", self.ctx.ssh_config, "-o", "BatchMode=yes", "-x", host,
                   f"{self.mode} {AGENT_FLAG}"]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        spec = {"coord": self.coord.address, "argv": self.argv, "inherit": self.inherit_env, "cwd": self.cwd,
                "ranks": [{"rank": r.rank, "env": r.env} for r in ranks]}
        try:
            proc.stdin.write(json.dumps(spec).encode() + b"\n")
            proc.stdin.flush()
        except OSError:
            pass
        a = AgentHandle(host, [r.rank for r in ranks], proc)
        for target in (self._read_agent, self._read_stderr):
            a.readers.append(threading.Thread(target=target, args=(a,), daemon=True))
            a.readers[-1].start()
        return a

    def _on_signal(self, signum, frame) -> None:
        self.signalled = signum
        with self.cv:
            self.cv.notify()

    def run(self) -> JobResult:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
            signal.signal(sig, self._on_signal)
        signal.alarm(HARD_CAP_S)
        self.coord = Coordinator(self.ctx.address, len(self.plan), abort_on_loss=not self.stop_on_failure)
        hosts: dict[str, list[RankPlan]] = {}
        for r in self.plan:
            r.env[COORD_ENV] = self.coord.address       # how a rank finds the rendezvous
            hosts.setdefault(r.host, []).append(r)
        res = JobResult()
        for host, ranks in hosts.items():
            self.agents.append(self._spawn(host, ranks))
        eofs, grace_until = 0, None
        while eofs < len(self.agents):
            if self.signalled:
                res.signalled = self.signalled
                break
            if grace_until is not None and time.monotonic() >= grace_until:
                break
            ev = self._next(0.05)
            if ev is None:
                continue
            kind = ev[0]
            if kind == "ready":
                ev[1].ready = True
                if all(a.ready for a in self.agents):
                    for a in self.agents:
                        try:
                            a.proc.stdin.write(b"go\n")
                            a.proc.stdin.flush()
                        except OSError:
                            pass
            elif kind == "out":
                self._relay(ev[1], ev[2], ev[3])
            elif kind == "exit":
                rank, code = ev[1], ev[2]
                for fd in (1, 2):
                    self._relay(rank, fd, b"", final=True)
                res.exits[rank] = code
                if code != 0 and res.first_bad is None:
                    res.first_bad = (rank, code)
                    if self.stop_on_failure:             # what the ranks already wrote still arrives
                        grace_until = time.monotonic() + 0.3
            elif kind == "eof":
                a, eofs = ev[1], eofs + 1
                rc = a.proc.wait()
                if not a.ready:
                    res.daemon_failed = (a.host, rc)
                    break
                if grace_until is None and any(r not in res.exits for r in a.ranks):
                    res.lost_daemon = a.host
                    break
        self.shutdown()
        return res

    def shutdown(self) -> None:
        """End every rank: close the agents' sessions (they kill their ranks), drop the ranks'
        coordinator links, wait for the agents (also those whose ssh client is already gone), then
        kill what is left."""
        for a in self.agents:
            try:
                a.proc.stdin.close()
            except OSError:
                pass
        self.coord.close_ranks()
        deadline = time.monotonic() + 5.0
        for a in self.agents:
            try:
                a.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self.coord.agents_gone(deadline)
        for a in self.agents:
            if a.proc.poll() is None:
                a.proc.kill()
                a.proc.wait()
        self.coord.close()
        for a in self.agents:                   # what is still in the pipes is relayed
            for t in a.readers:
                t.join(1.0)
        while True:
            ev = self._next(0)
            if ev is None:
                break
            if ev[0] == "out":
                self._relay(ev[1], ev[2], ev[3])


# ---- the agent (orted / slurmstepd) ----------------------------------------------------------------

def agent_main(ctx: Ctx) -> int:
    """Start this host's ranks, relay their output and exit codes as JSON lines on stdout, and kill
    them when stdin (the ssh session) closes, the coordinator goes away, or a signal comes."""
    die_with_parent()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(sig, lambda *_: stop.set())
    signal.alarm(HARD_CAP_S)
    line = sys.stdin.buffer.readline()
    if not line:
        return 1
    spec = json.loads(line)
    out_lock = threading.Lock()

    def emit(obj: dict) -> None:
        with out_lock:
            try:
                sys.stdout.buffer.write(json.dumps(obj).encode() + b"\n")
                sys.stdout.buffer.flush()
            except OSError:
                stop.set()

    control = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        host, _, port = spec["coord"].rpartition(":")
        control.bind((ctx.address, 0))
        control.connect((host, int(port)))
        control.sendall(b'{"op": "agent"}\n')
    except OSError:
        return 1

    def watch(read) -> None:
        try:
            while read():
                pass
        except OSError:
            pass
        stop.set()

    # like orted: report in, and start the ranks only when every daemon of the job has reported
    emit({"ready": ctx.node})
    if sys.stdin.buffer.readline().strip() != b"go":
        return 0
    threading.Thread(target=watch, args=(lambda: sys.stdin.buffer.read1(4096),), daemon=True).start()
    threading.Thread(target=watch, args=(lambda: control.recv(4096),), daemon=True).start()

    children: list[tuple[int, subprocess.Popen, list[threading.Thread]]] = []
    for r in spec["ranks"]:
        env = dict(os.environ) if spec["inherit"] else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        env.update(r["env"])
        try:
            # the launcher's working directory where the node has it (as orted and slurmstepd do)
            cwd = spec["cwd"] if os.path.isdir(spec["cwd"]) else os.environ.get("HOME", "/")
            child = subprocess.Popen(spec["argv"], env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            emit({"r": r["rank"], "fd": 2, "b": base64.b64encode(
                f"{spec['argv'][0]}: {e.strerror}\n".encode()).decode()})
            emit({"r": r["rank"], "exit": 127})
            continue
        pumps = []
        for fd, pipe in ((1, child.stdout), (2, child.stderr)):
            def pump(rank=r["rank"], fd=fd, pipe=pipe) -> None:
                for chunk in iter(lambda: pipe.read1(65536), b""):
                    emit({"r": rank, "fd": fd, "b": base64.b64encode(chunk).decode()})
            t = threading.Thread(target=pump, daemon=True)
            t.start()
            pumps.append(t)
        children.append((r["rank"], child, pumps))

    running = list(children)
    while running and not stop.is_set():
        for item in list(running):
            rank, child, pumps = item
            code = child.poll()
            if code is not None:
                for t in pumps:
                    t.join(2)
                emit({"r": rank, "exit": code if code >= 0 else 128 - code})
                running.remove(item)
        time.sleep(0.01)
    if running:                                   # the session or the coordinator went away
        for _, child, _ in running:
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and any(c.poll() is None for _, c, _ in running):
            time.sleep(0.01)
        for rank, child, pumps in running:
            _signal_group(child, signal.SIGKILL)
            code = child.wait()
            for t in pumps:
                t.join(0.5)
            emit({"r": rank, "exit": code if code >= 0 else 128 - code})
    # exit with the coordinator link still open: the kernel closes it after this process's memory is
    # gone, so whoever waits for the link to close (mpirun after a signal) sees no agent left behind
    try:
        sys.stdout.flush()
    except OSError:
        pass
    os._exit(0)


def _signal_group(child: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(child.pid, sig)
    except OSError:
        pass


# ---- mpirun (Open MPI 4.x) ------------------------------------------------------------------------

ROOT_REFUSED = """--------------------------------------------------------------------------
mpirun has detected an attempt to run as root.
Running at root is *strongly* discouraged as any mistake (e.g., in
defining TMPDIR) or bug can result in catastrophic damage to the OS
file system, leaving your system in an unusable state.

You can override this protection by adding the --allow-run-as-root
option to your cmd line. However, we reiterate our strong advice
against doing so - please do so at your own risk.
--------------------------------------------------------------------------
"""
DASHES = "-" * 74 + "\n"
DAEMON_FAILED = DASHES + """ORTE was unable to reliably start one or more daemons.
This usually is caused by:

* not finding the required libraries and/or binaries on
  one or more nodes. Please check your PATH and LD_LIBRARY_PATH
  settings, or configure OMPI with --enable-orterun-prefix-by-default

* lack of authority to execute on one or more specified nodes.
  Please verify your allocation and authorities.

* the inability to write startup files into /tmp (--tmpdir/orte_tmpdir_base).
  Please check with your sys admin to determine the correct location to use.

*  compilation of the orted with dynamic libraries when static are required
  (e.g., on Cray). Please check your configure cmd line and consider using
  one of the contrib/platform definitions for your system type.

* an inability to create a connection back to mpirun due to a
  lack of common network interfaces and/or no route found between
  them. Please check network connectivity (including firewalls
  and network routing requirements).
""" + DASHES
LOST_DAEMON = DASHES + """ORTE has lost communication with a remote daemon.

  HNP daemon   : [[{job},0],0] on node {me}
  Remote daemon: [[{job},0],{vpid}] on node {host}

This is usually due to either a failure of the TCP network
connection to the node, or possibly an internal failure of
the daemon itself. We cannot recover from this failure, and
therefore will terminate the job.
""" + DASHES
RANK_FAILED = ("-" * 55 + "\nPrimary job  terminated normally, but 1 process returned\n"
               "a non-zero exit code. Per user-direction, the job has been aborted.\n" + "-" * 55 + "\n"
               + DASHES + "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
               "the job to be terminated. The first process to do so was:\n\n"
               "  Process name: [[{job},1],{rank}]\n  Exit code:    {code}\n" + DASHES)
NOT_ENOUGH_SLOTS = DASHES + """There are not enough slots available in the system to satisfy the {n}
slots that were requested by the application:

  {app}

Either request fewer slots for your application, or make more slots
available for use.
""" + DASHES
NO_EXECUTABLE = DASHES + "No executable was specified on the mpirun command line.\n\nAborting.\n" + DASHES

MPIRUN_VALUE_OPTS = {"np", "n", "c", "H", "host", "hostfile", "machinefile", "default-hostfile", "N",
                     "npernode", "map-by", "x", "bind-to", "rank-by", "prefix", "wdir", "wd", "output-filename",
                     "tmpdir", "path", "launch-agent", "report-uri", "ppr"}
MPIRUN_FLAGS = {"allow-run-as-root", "tag-output", "timestamp-output", "oversubscribe", "q", "quiet", "v",
                "verbose", "display-map", "display-allocation", "report-bindings", "merge-stderr-to-stdout",
                "nolocal", "no-oversubscribe", "bind-to-core", "bind-to-socket", "noprefix", "show-progress"}


def mpirun_main(ctx: Ctx, args: list[str]) -> int:
    hosts: list[tuple[str, int]] = []
    np = npernode = cwd = None
    by_node = allow_root = tag = oversubscribe = False
    exports: dict[str, str] = {}
    mca: dict[str, str] = {}
    program: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            program = args[i + 1:]
            break
        if not a.startswith("-") or a == "-":
            program = args[i:]
            break
        name, eq, inline = a.lstrip("-").partition("=")
        if name in ("mca", "gmca"):
            if i + 2 >= len(args):
                write_err(f"mpirun: Error: option \"{a}\" did not have enough parameters (2)\n")
                return 1
            mca[args[i + 1]] = args[i + 2]
            i += 3
            continue
        if name in MPIRUN_VALUE_OPTS:
            if not eq:
                if i + 1 >= len(args):
                    write_err(f"mpirun: Error: option \"{a}\" did not have enough parameters (1)\n")
                    return 1
                i, inline = i + 1, args[i + 1]
            if name in ("np", "n", "c"):
                np = strtol(inline)
            elif name in ("H", "host"):
                for entry in inline.split(","):
                    h, _, slots = entry.partition(":")
                    hosts.append((h, int(slots) if slots.isdigit() else 1))
            elif name in ("hostfile", "machinefile", "default-hostfile"):
                try:
                    with open(inline) as f:
                        for ln in f:
                            words = ln.split("#", 1)[0].split()
                            if words:
                                slots = next((int(w[6:]) for w in words[1:] if w.startswith("slots=")),
                                             os.cpu_count() or 1)
                                hosts.append((words[0], slots))
                except OSError:
                    write_err(DASHES + f"Open RTE was unable to open the hostfile:\n    {inline}\n"
                              "Check to make sure the path and filename are correct.\n" + DASHES)
                    return 1
            elif name in ("N", "npernode"):
                npernode = strtol(inline)
            elif name == "map-by":
                m = re.match(r"ppr:(\d+):node", inline)
                if m:
                    npernode = int(m.group(1))
                by_node = inline.split(":")[0] == "node"
            elif name in ("wdir", "wd"):
                cwd = inline
            elif name == "x":
                k, has, v = inline.partition("=")
                if has:
                    exports[k] = v
                elif k in os.environ:
                    exports[k] = os.environ[k]
            i += 1
            continue
        if name in MPIRUN_FLAGS:
            allow_root |= name == "allow-run-as-root"
            tag |= name == "tag-output"
            oversubscribe |= name == "oversubscribe"
            i += 1
            continue
        write_err(f"mpirun: Error: unknown option \"{a}\"\nType 'mpirun --help' for usage.\n")
        return 1
    if os.geteuid() == 0 and not allow_root and not (os.environ.get("OMPI_ALLOW_RUN_AS_ROOT") == "1" and
                                                     os.environ.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1"):
        write_err(ROOT_REFUSED)
        return 1
    if not program:
        write_err(NO_EXECUTABLE)
        return 1
    merged: dict[str, int] = {}
    for h, s in hosts or [(ctx.node, os.cpu_count() or 1)]:
        merged[h] = merged.get(h, 0) + s
    order = list(merged)
    if npernode:
        total = npernode * len(order)
        np = np or total
        placement = [order[r // npernode] for r in range(min(np, total))]
    else:
        total = sum(merged.values())
        np = np or total
        if by_node:
            placement, left = [], dict(merged)
            while len(placement) < min(np, total):
                for h in order:
                    if left[h] and len(placement) < np:
                        placement.append(h)
                        left[h] -= 1
        else:
            placement = [h for h in order for _ in range(merged[h])][:np]
    if np > total and not oversubscribe:
        write_err(NOT_ENOUGH_SLOTS.format(n=np, app=program[0]))
        return 1
    while len(placement) < np:                    # oversubscribed: round-robin on
        placement.append(order[len(placement) % len(order)])
    job = (os.getpid() * 7919) % 60000 + 1000
    plan = []
    for rank, host in enumerate(placement):
        local = placement[:rank].count(host)
        env = {**exports, **{f"OMPI_MCA_{k}": v for k, v in mca.items()},
               "OMPI_COMM_WORLD_SIZE": str(np), "OMPI_COMM_WORLD_RANK": str(rank),
               "OMPI_COMM_WORLD_LOCAL_RANK": str(local), "OMPI_COMM_WORLD_LOCAL_SIZE": str(placement.count(host)),
               "OMPI_COMM_WORLD_NODE_RANK": str(local), "OMPI_UNIVERSE_SIZE": str(np), "PMIX_RANK": str(rank)}
        plan.append(RankPlan(rank, host, env))
    prefix = (lambda r, fd: b"[1,%d]<%s>:" % (r, b"stdout" if fd == 1 else b"stderr")) if tag else None
    res = Job(ctx, "mpirun", plan, program, inherit_env=True, prefix=prefix, stop_on_failure=True, cwd=cwd).run()
    if res.signalled:
        return 128 + res.signalled if res.signalled != signal.SIGALRM else 1
    if res.daemon_failed:
        write_err(DAEMON_FAILED)
        return res.daemon_failed[1] or 1
    if res.first_bad:
        rank, code = res.first_bad
        write_err(RANK_FAILED.format(job=job, rank=rank, code=code))
        return code
    if res.lost_daemon:
        hosts_order = list(dict.fromkeys(placement))
        write_err(LOST_DAEMON.format(job=job, me=ctx.node, vpid=hosts_order.index(res.lost_daemon) + 1,
                                     host=res.lost_daemon))
        return 1
    return 0


# ---- srun (Slurm) ----------------------------------------------------------------------------------

def expand_hostlist(text: str) -> list[str]:
    """Slurm hostlist: "node[1-3,5],gpu[01-02]" -> node1 node2 node3 node5 gpu01 gpu02."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    hosts: list[str] = []
    for part in filter(None, parts):
        m = re.match(r"([^\[]*)\[([^\]]*)\](.*)$", part)
        if not m:
            hosts.append(part)
            continue
        for rng in m.group(2).split(","):
            lo, _, hi = rng.partition("-")
            for n in range(int(lo), int(hi or lo) + 1):
                hosts += [m.group(1) + str(n).zfill(len(lo)) + rest for rest in expand_hostlist(m.group(3)) or [""]]
    return hosts


def fold_ranks(ranks: list[int]) -> str:
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(out)


SRUN_VALUE_OPTS = {"N": "nodes", "w": "nodelist", "n": "ntasks", "t": "time", "p": "partition", "J": "job-name",
                   "c": "cpus-per-task", "G": "gpus", "o": "output", "e": "error", "A": "account"}
SRUN_LONG_VALUE = {"nodes", "nodelist", "ntasks", "ntasks-per-node", "export", "mpi", "time", "partition",
                   "job-name", "cpus-per-task", "gpus", "gpus-per-node", "gres", "cpu-bind", "gpu-bind", "output",
                   "error", "account", "distribution", "mem", "qos", "reservation", "kill-on-bad-exit"}
SRUN_FLAGS = {"l": "label", "u": "unbuffered", "v": "verbose", "K": "kill-on-bad-exit"}
SRUN_LONG_FLAGS = {"label", "unbuffered", "verbose", "overlap", "exclusive", "overcommit", "kill-on-bad-exit"}


def srun_main(ctx: Ctx, args: list[str]) -> int:
    values: dict[str, str] = {}
    flags: set[str] = set()
    program: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            program = args[i + 1:]
            break
        if a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            if name in SRUN_LONG_VALUE and (eq or name != "kill-on-bad-exit"):
                if not eq:
                    if i + 1 >= len(args):
                        write_err(f"srun: option '--{name}' requires an argument\n"
                                  "Try \"srun --help\" for more information\n")
                        return 1
                    i, val = i + 1, args[i + 1]
                values[name] = val
            elif name in SRUN_LONG_FLAGS:
                flags.add(name)
            else:
                write_err(f"srun: unrecognized option '{a}'\nTry \"srun --help\" for more information\n")
                return 1
        elif a.startswith("-") and len(a) > 1:
            c = a[1]
            if c in SRUN_VALUE_OPTS:
                val = a[2:]
                if not val:
                    if i + 1 >= len(args):
                        write_err(f"srun: option requires an argument -- '{c}'\n"
                                  "Try \"srun --help\" for more information\n")
                        return 1
                    i, val = i + 1, args[i + 1]
                values[SRUN_VALUE_OPTS[c]] = val
            elif c in SRUN_FLAGS and len(a) == 2:
                flags.add(SRUN_FLAGS[c])
            else:
                write_err(f"srun: invalid option -- '{c}'\nTry \"srun --help\" for more information\n")
                return 1
        else:
            program = args[i:]
            break
        i += 1
    if not program:
        write_err("srun: fatal: No command given to execute.\n")
        return 1
    if "nodelist" in values:
        nodes = expand_hostlist(values["nodelist"])
    elif os.environ.get("SLURM_JOB_NODELIST"):
        nodes = expand_hostlist(os.environ["SLURM_JOB_NODELIST"])
    else:
        nodes = [ctx.node]
    if "nodes" in values:
        want = strtol(values["nodes"].split("-")[0])
        if want > len(nodes):
            write_err("srun: error: Unable to create step for job: Requested node configuration is not available\n")
            return 1
        if "nodelist" not in values:
            nodes = nodes[:want]
    per_node = strtol(values["ntasks-per-node"]) if "ntasks-per-node" in values else None
    ntasks = strtol(values["ntasks"]) if "ntasks" in values else (per_node or 1) * len(nodes)
    if per_node:
        placement = [nodes[r // per_node] for r in range(min(ntasks, per_node * len(nodes)))]
    else:
        base, extra = divmod(ntasks, len(nodes))
        placement = [n for k, n in enumerate(nodes) for _ in range(base + (k < extra))]
    used = list(dict.fromkeys(placement))
    export = values.get("export", "ALL")
    words = [w for w in export.split(",") if w]
    env_common = dict(os.environ) if "ALL" in words else {}
    for w in words:
        k, has, v = w.partition("=")
        if has:
            env_common[k] = v
        elif k not in ("ALL", "NONE") and k in os.environ:
            env_common[k] = os.environ[k]
    nodelist = ",".join(used)
    plan = []
    for rank, host in enumerate(placement):
        env = {**env_common, "SLURM_PROCID": str(rank), "SLURM_NTASKS": str(len(placement)),
               "SLURM_NPROCS": str(len(placement)), "SLURM_LOCALID": str(placement[:rank].count(host)),
               "SLURM_NODEID": str(used.index(host)), "SLURM_NNODES": str(len(used)),
               "SLURM_STEP_NUM_NODES": str(len(used)), "SLURM_STEP_NUM_TASKS": str(len(placement)),
               "SLURM_STEP_NODELIST": nodelist, "SLURMD_NODENAME": host}
        env.setdefault("SLURM_JOB_NODELIST", nodelist)
        plan.append(RankPlan(rank, host, env))
    width = len(str(len(placement) - 1))
    prefix = (lambda r, fd: b"%*d: " % (width, r)) if "label" in flags else None
    res = Job(ctx, "srun", plan, program, inherit_env=False, prefix=prefix, stop_on_failure=False).run()
    if res.signalled:
        return 128 + res.signalled if res.signalled != signal.SIGALRM else 1
    if res.daemon_failed:
        write_err("srun: error: Task launch for StepId=1.0 failed on node %s: Communication connection failure\n"
                  "srun: error: Application launch failed: Communication connection failure\n"
                  "srun: Job step aborted\n" % res.daemon_failed[0])
        return 1
    failed: dict[tuple[str, int], list[int]] = {}
    for rank in sorted(res.exits):
        if res.exits[rank]:
            failed.setdefault((placement[rank], res.exits[rank]), []).append(rank)
    for (host, code), ranks in sorted(failed.items(), key=lambda kv: kv[1][0]):
        write_err("srun: error: %s: task%s %s: Exited with exit code %d\n"
                  % (host, "s" if len(ranks) > 1 else "", fold_ranks(ranks), code))
    return max(res.exits.values(), default=1 if res.lost_daemon else 0)


# ---- entry point --------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    if len(argv) < 6:
        sys.stderr.write("usage: nccl_tests.py NODE NODE_ADDRESS NET STATE_JSON MODE ARGV0 [args]\n")
        return 2
    node, address, net, state_path, mode, argv0, *args = argv
    ctx = Ctx(node, address, net, state_path, State.load(state_path))
    if mode in LAUNCHERS and args[:1] == [AGENT_FLAG]:
        return agent_main(ctx)
    if mode == "mpirun":
        return mpirun_main(ctx, args)
    if mode == "srun":
        return srun_main(ctx, args)
    if mode in PERF_TOOLS:
        signal.signal(signal.SIGALRM, lambda *_: os._exit(1))
        signal.alarm(HARD_CAP_S)
        try:
            return perf_main(ctx, mode, argv0, args)
        except BrokenPipeError:
            os._exit(1)
    sys.stderr.write(f"nccl_tests.py: unknown mode {mode!r}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
