"""The commands that run nccl-tests: one test on a node, or a launcher (mpirun, srun) started on a
launch node that runs one test across several nodes.

Every run is bounded twice: `timeout` on the node (so a hang ends as exit 124 with the output so far,
which says how far the run got) and the probe's own timeout around it. Every value reaches the node
as a positional argument of `sh -c SCRIPT sh ARGS...`, quoted once by the transport: the script's own
words, then the command as argv words. The test's environment is not among them: a node's
/proc/*/cmdline is readable by every user there, and a probe's argv is kept in report.json. It
travels on the probe's stdin as NAME=VALUE lines (values escaped, names checked here), which the
script exports before its own variables are set, so no variable of the job's can change the time
limit or the binary; only the variables that the test needs travel (env_policy.travels), from the job
never one that names a library, plugin, program or file (env_policy.job_refuses: the test runs as root),
and `mpirun -x NAME` passes names, never values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodecheck.core.model import Probe
from nodecheck.probes.env_policy import ENV_NAME, probe_env, travels
from nodecheck.probes.pairtest import ARGUMENT

# binary name of each collective nccl-tests measures
COLLECTIVES = {
    "all_reduce": "all_reduce_perf",
    "all_gather": "all_gather_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "alltoall": "alltoall_perf",
}

# Isolation runs: the same test with transports switched off, so a slow result says which part is slow.
VARIANT_ENV: dict[str, dict[str, str]] = {
    "default": {},
    # every byte through the NIC, even between GPUs of one node (NCCL's documented switches)
    "network_only": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},
    # GPU-to-GPU only where NVLink connects them; no shared-memory or InfiniBand fallback
    "nvlink_only": {"NCCL_P2P_LEVEL": "NVL", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1"},
}
VARIANT_WORDS = {"default": "", "network_only": "network only", "nvlink_only": "NVLink only"}

# the NCCL_DEBUG a test runs with unless its env sets one: it prints the "NCCL version X" line that
# tells a run that hung before NCCL init from one that hung inside it (judging/nccl_runs.PRINTS_VERSION)
DEFAULT_NCCL_DEBUG = "VERSION"
# host names, paths and launcher options that may reach a node as words (never one that could be
# taken for a different option than intended: checked per use)
WORD = re.compile(r"^[A-Za-z0-9_./:=@%+,-]+$")
HOST = ARGUMENT  # host names: what a pair test may pass too

# The newest nccl-tests write their results as JSON (src/util.cu, JSON_FILE_VERSION 2) with this
# option; `json: auto` uses it when the binary's usage text lists it.
JSON_OPTION = "-J"
JSON_USAGE_MARK = "-J,--output_file"

KILL_AFTER_S = 10  # timeout -k: TERM first, KILL this much later
PROBE_SLACK_S = 10  # the probe outlives the test's own timeout by this
USAGE_CHECK_S = 10  # `tool -h` (json: auto) before the test: bounded, and budgeted

# stdin: NAME=VALUE lines (env_lines: a backslash and control characters as \0ooo, which printf %b
# undoes; the x keeps a trailing newline from $(...)). A line without a valid name is skipped.
_RUN = r"""
set -f
while IFS= read -r nc_line; do
  nc_name=${nc_line%%=*}
  case $nc_name in ''|[!A-Za-z_]*|*[!A-Za-z0-9_]*) continue ;; esac
  nc_value=$(printf '%bx' "${nc_line#*=}"); nc_value=${nc_value%x}
  export "$nc_name=$nc_value"
done
[ "${1-}" = -- ] && shift
nc_limit=$1; nc_tool=$2; nc_json=$3; nc_mark=$4; nc_jopt=$5; shift 5
command -v timeout >/dev/null 2>&1 || { echo "timeout not found (coreutils): cannot bound the test" >&2; exit 127; }
command -v "$nc_tool" >/dev/null 2>&1 || { echo "$nc_tool not found (nccl-tests not installed, or set binary_dir)" >&2; exit 127; }
command -v "$1" >/dev/null 2>&1 || { echo "$1 not found on this node" >&2; exit 127; }
nc_out=
if [ "$nc_json" = on ] || { [ "$nc_json" = auto ] && timeout -k 1 "$USAGE" "$nc_tool" -h 2>&1 </dev/null | grep -q -F -e "$nc_mark"; }; then
  nc_dir=$(mktemp -d "${TMPDIR:-/tmp}/nodecheck-nccl.XXXXXX") || { echo "cannot create a temporary directory" >&2; exit 70; }
  nc_out=$nc_dir/result.json
fi
echo "@@nodecheck begin test"
if [ -n "$nc_out" ]; then
  timeout -k "$KILL" "$nc_limit" "$@" "$nc_jopt" "$nc_out" </dev/null 2>&1; nc_rc=$?
else
  timeout -k "$KILL" "$nc_limit" "$@" </dev/null 2>&1; nc_rc=$?
fi
echo "@@nodecheck end test rc=$nc_rc"
if [ -n "$nc_out" ]; then
  if [ -s "$nc_out" ]; then echo "@@nodecheck begin json"; cat "$nc_out"; echo; echo "@@nodecheck end json rc=0"; fi
  rm -rf "$nc_dir"
fi
exit 0
""".replace('"$KILL"', str(KILL_AFTER_S)).replace('"$USAGE"', str(USAGE_CHECK_S))


def probe_timeout_s(limit_s: float, json: str) -> float:
    """The longest a test probe runs: the usage check (json: auto), the test, its KILL grace, slack."""
    return math.ceil(limit_s) + (USAGE_CHECK_S + 1 if json == "auto" else 0) + KILL_AFTER_S + PROBE_SLACK_S


@dataclass(frozen=True)
class Sweep:
    """What one nccl-tests run measures (its command-line options)."""

    collective: str = "all_reduce"
    min_bytes: int = 8
    max_bytes: int = 8 << 30
    step_factor: int = 2
    iters: int = 20
    warmup_iters: int = 5
    check: bool = True
    datatype: str = "float"
    op: str = "sum"

    def args(self, gpus_per_process: int) -> list[str]:
        return [
            "-b",
            str(self.min_bytes),
            "-e",
            str(self.max_bytes),
            "-f",
            str(self.step_factor),
            "-g",
            str(gpus_per_process),
            "-n",
            str(self.iters),
            "-w",
            str(self.warmup_iters),
            "-c",
            "1" if self.check else "0",
            "-d",
            self.datatype,
            "-o",
            self.op,
        ]


def tool_path(collective: str, binary_dir: str | None) -> str:
    name = COLLECTIVES[collective]
    return f"{binary_dir.rstrip('/')}/{name}" if binary_dir else name


def job_env(env: Mapping[str, str], variant: str, job: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment: the operator's `env` and the job's variables over it, each as far as it
    travels to a node (env_policy.probe_env: NCCL_*, TORCH_*, CUDA_*, UCX_*, ...; never a secret-looking
    name; from the job, never one that names a library, plugin, program or file), the variant's
    switches over them, NCCL_DEBUG=VERSION unless one of them sets NCCL_DEBUG."""
    for name in [*env, *(job or {})]:
        if not ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")
    return {"NCCL_DEBUG": DEFAULT_NCCL_DEBUG, **probe_env(env, job)[0], **VARIANT_ENV[variant]}


def left_behind(env: Mapping[str, str], job: Mapping[str, str] | None = None) -> dict[str, str]:
    """{name: why} of the variables that do not reach the test (job_env leaves them out), by name."""
    return probe_env(env, job)[1]


def env_lines(env: Mapping[str, str]) -> str:
    """The probe's stdin: NAME=VALUE a line, each byte of a value that is a backslash or a control
    character (a newline would start another variable) as printf %b's \0ooo."""

    def escaped(value: str) -> str:
        return "".join(f"\\0{ord(c):03o}" if c < " " or c in "\\\x7f" else c for c in value)

    for name in env:
        if not ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")
        if not travels(name):  # job_env leaves these out: a caller that did not is wrong
            raise ValueError(f"{name!r} is not a variable a test may be given (see env_policy.travels)")
    return "".join(f"{k}={escaped(v)}\n" for k, v in env.items())


def _probe(name: str, tool: str, command: Sequence[str], env: Mapping[str, str], limit_s: float, json: str) -> Probe:
    return Probe(
        name,
        ("sh", "-c", _RUN, "sh", "--", str(math.ceil(limit_s)), tool, json, JSON_USAGE_MARK, JSON_OPTION, *command),
        timeout_s=probe_timeout_s(limit_s, json),
        stdin=env_lines(env),
        alone=True,  # a bandwidth measurement: nothing else on the node beside it
    )


def command_words(argv: Sequence[str]) -> tuple[str, ...]:
    """The test's own command (mpirun ..., all_reduce_perf ...) in a probe's argv."""
    return tuple(argv[list(argv).index("--") + 6 :])


def single_node(
    name: str,
    sweep: Sweep,
    gpus: int,
    env: Mapping[str, str],
    limit_s: float,
    binary_dir: str | None = None,
    json: str = "auto",
) -> Probe:
    """One process driving `gpus` GPUs of this node (-g)."""
    tool = tool_path(sweep.collective, binary_dir)
    return _probe(name, tool, [tool, *sweep.args(gpus)], env, limit_s, json)


def multi_node(
    name: str,
    launcher: str,
    hosts: Sequence[str],
    ranks_per_node: int,
    gpus_per_rank: int,
    sweep: Sweep,
    env: Mapping[str, str],
    limit_s: float,
    binary_dir: str | None = None,
    launcher_args: Sequence[str] = (),
    json: str = "auto",
) -> Probe:
    """`launcher` (mpirun or srun) started on the first host, ranks_per_node processes on every host,
    each driving gpus_per_rank GPUs. The first host is rank 0's (it prints, and writes the JSON)."""
    for h in hosts:
        if not HOST.match(h):
            raise ValueError(f"{h!r} cannot be passed to {launcher} as a host name")
    for word in launcher_args:
        if not WORD.match(word):
            raise ValueError(f"{word!r} cannot be passed to {launcher}")
    tool = tool_path(sweep.collective, binary_dir)
    test = [tool, *sweep.args(gpus_per_rank)]
    total = len(hosts) * ranks_per_node
    if launcher == "mpirun":
        # -H host:slots fills each host's slots in order: ranks 0..r-1 on the first host, ...
        command = ["mpirun", *launcher_args, "-np", str(total), "-H", ",".join(f"{h}:{ranks_per_node}" for h in hosts)]
        for key in env:
            command += ["-x", key]  # the value comes from the launch shell's export
        command += test
    elif launcher == "srun":
        command = [
            "srun",
            *launcher_args,
            f"--nodes={len(hosts)}",
            f"--nodelist={','.join(hosts)}",
            f"--ntasks={total}",
            f"--ntasks-per-node={ranks_per_node}",
            "--export=ALL",
            *test,
        ]
    else:
        raise ValueError(f"unknown launcher {launcher!r}")
    return _probe(name, tool, command, env, limit_s, json)


# Before a multi-node test: which of the tools (binaries, the launcher) each node has, by `command -v`.
TOOLS_PROBE = "nccl_tools"
_TOOLS = r"""
for t in "$@"; do
  if p=$(command -v "$t" 2>/dev/null); then echo "@@nodecheck have $t $p"; else echo "@@nodecheck missing $t"; fi
done
"""


def tools_probe(tools: Sequence[str]) -> Probe:
    """The tools reach the script as positional arguments; parsers/tools.missing_tools reads its output."""
    return Probe(TOOLS_PROBE, ("sh", "-c", _TOOLS, "sh", *tools), timeout_s=15)
