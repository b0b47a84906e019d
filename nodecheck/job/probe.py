"""The job-check probe: ONE round trip per node with what the job's invariants need from it, and its
pure parser.

Sections (nodecheck's `@@nodecheck` framing, parsers/sections.py):
  conf_path / user.conf / nccl.conf  the files NCCL reads its NCCL_* variables from (as the nccl_env probe)
  node_env   the session's NCCL_* / TORCH_* / CUDA_* variables, filtered ON the node (awk's ENVIRON,
             values escaped onto one line): other variables (secrets) never leave it
  writable   flight-recorder dump directories (default, job:NAME, node:NAME) and the checkpoint directory
  ckpt_exists, df, ckpt_fstype   the checkpoint directory: 1 / 0 / notdir, free bytes (df -P -k), the
             filesystem type (stat -f: "nfs", "lustre", "xfs", ...) to tell shared from node-local
  resume     the resume point: "exists" / "missing" (a path), or the checkpoint directory's first entry
             (neither hidden nor lost+found: an empty filesystem's root holds those)
  gpus       nvidia-smi --query-gpu=index --format=csv,noheader
Every value (checkpoint dir, resume path, dump prefixes) is a positional argument, never in the script.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe
from nodecheck.job.spec import JobSpec
from nodecheck.judging.nccl_settings import TRACE_FILE_VARS
from nodecheck.parsers.nccl_config import NcclConf, first_line, key_values, read_confs, read_node_env, unescaped
from nodecheck.parsers.nvidia_smi_csv import parse_query_gpu
from nodecheck.parsers.sections import split_sections
from nodecheck.probes.shell import ESCAPE_FUNCTIONS, NCCL_CONF_FUNCTION, WRITABLE_FUNCTION

PROBE_NAME = "job"
CHECKPOINT = "checkpoint"  # the writable label of the checkpoint directory
ENV_PREFIXES = ("NCCL_", "TORCH_", "CUDA_")

# $1: the job's NCCL_CONF_FILE ("" when unset); $2: the checkpoint directory ("" when none);
# $3: the resume point ("" = any entry of the checkpoint directory, "-" = not resuming); $4: the
# job's user ("" when not known: shell.job_file reads the conf file as theirs, and the directory tests
# run as them: shell.as_job); then LABEL PATH pairs: the job's dump-file prefixes.
# The checkpoint and dump-directory tests are the job's: made as root they would say "writable" for a
# directory only root may write, answer whether a path the job cannot reach exists, and name the first
# entry of a directory the job cannot read. So they run as the job's user (checked_as: that user's name;
# "root" when none is known, said in the verdicts; "!not checked as the job's user: WHY", then no
# directory fact is given at all, never root's answer in the user's place).
_SCRIPT = (
    WRITABLE_FUNCTION
    + ESCAPE_FUNCTIONS
    + NCCL_CONF_FUNCTION
    + r"""
conf=$1; ckpt=$2; resume=$3; job_user=$4; shift 4; named=1
[ -n "$conf" ] || conf=${NCCL_CONF_FILE:-}
[ -n "$conf" ] || { conf=$HOME/.nccl.conf; named=0; }
nccl_confs "$conf" "$named" "$job_user"
job_as "$job_user"
printf '@@nodecheck checked_as %s\n' "$(escaped "$ja_how")"
echo "@@nodecheck begin node_env"
env_matching '^(NCCL|TORCH|CUDA)_[A-Za-z0-9_]*$' 2>&1; echo "@@nodecheck end node_env rc=$?"
echo "@@nodecheck begin writable"
writable default /tmp/nccl_trace_rank_
while [ $# -ge 2 ]; do writable "$1" "$2"; shift 2; done
[ -n "${TORCH_FR_DUMP_TEMP_FILE+x}" ] && writable node:TORCH_FR_DUMP_TEMP_FILE "$TORCH_FR_DUMP_TEMP_FILE"
[ -n "${TORCH_NCCL_DEBUG_INFO_TEMP_FILE+x}" ] && writable node:TORCH_NCCL_DEBUG_INFO_TEMP_FILE "$TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
[ -n "$ckpt" ] && { [ "$ja_run" = ! ] || as_job test -d "$ckpt"; } && writable checkpoint "$ckpt/x"
echo "@@nodecheck end writable rc=0"
if [ -n "$ckpt" ] && [ "$ja_run" != ! ]; then
  if as_job test -d "$ckpt"; then
    echo "@@nodecheck ckpt_exists 1"
    echo "@@nodecheck begin df"
    as_job df -P -k -- "$ckpt" 2>&1; echo "@@nodecheck end df rc=$?"
    printf '@@nodecheck ckpt_fstype %s\n' "$(as_job stat -f -c %T -- "$ckpt" 2>/dev/null | head -n 1)"
  elif as_job test -e "$ckpt"; then echo "@@nodecheck ckpt_exists notdir"
  else echo "@@nodecheck ckpt_exists 0"; fi
  if [ "$resume" = - ]; then :
  elif [ -n "$resume" ]; then
    if as_job test -e "$resume"; then echo "@@nodecheck resume exists"; else echo "@@nodecheck resume missing"; fi
  else
    # the first entry that a save wrote: a glob (never a file's own name, as ls FILE prints), without
    # dot-entries (.snapshot, .nfs*) and lost+found, which an empty filesystem's root holds
    first=$(as_job sh -c 'for e in "$1"/*; do
      [ -e "$e" ] || [ -L "$e" ] || continue
      case ${e##*/} in lost+found) continue ;; esac
      printf %s "${e##*/}"; break
    done' nodecheck-job-entries "$ckpt" 2>/dev/null)
    if [ -n "$first" ]; then printf '@@nodecheck resume entry %s\n' "$(escaped "$first")"
    else echo "@@nodecheck resume missing"; fi
  fi
fi
echo "@@nodecheck begin gpus"
nvidia-smi --query-gpu=index --format=csv,noheader 2>&1; echo "@@nodecheck end gpus rc=$?"
"""
)


def job_probe(spec: JobSpec, job_user: str = "") -> Probe:
    """`job_user`: the job's user (a uid or a name; "" not known), whose own NCCL_CONF_FILE is read
    even when private (shell.job_file)."""
    ck = spec.checkpoint
    resume = "-" if ck is None or not ck.resume else (ck.resume_from or "")
    args = [spec.env.get("NCCL_CONF_FILE", ""), ck.dir if ck else "", resume, job_user]
    for name in TRACE_FILE_VARS:
        if name in spec.env:
            args += [f"job:{name}", spec.env[name]]
    return Probe(PROBE_NAME, ("sh", "-c", _SCRIPT, "nodecheck-job", *args), timeout_s=30)


@dataclass(frozen=True)
class JobNodeFacts:
    node_env: Mapping[str, str]  # NCCL_*/TORCH_*/CUDA_* of nodecheck's session on the node
    conf: tuple[NcclConf, ...]  # the files NCCL reads, in its order
    writable: Mapping[str, str]  # label -> "ok" or "!why" (as the nccl_env probe)
    ckpt_exists: bool | None  # None: the job names no checkpoint directory
    ckpt_free_bytes: int | None  # None: not measured (see ckpt_df_error)
    ckpt_filesystem: str  # df's "Filesystem on Mounted-on", to tell a shared one
    ckpt_df_error: str
    resume: str  # "exists", "missing", "entry NAME", or "" (not asked)
    gpu_count: int | None  # None: nvidia-smi failed (gpu_error says how)
    gpu_error: str
    ckpt_not_dir: bool = False  # the path exists but is not a directory (a file)
    ckpt_fstype: str = ""  # stat -f's type name ("nfs", "xfs"); "" unknown
    checked_as: str = ""  # whose view the directory tests are: a user name ("root":
    # no job's user known), "!not checked as the job's user: WHY"


def parse_job_probe(text: str) -> JobNodeFacts:
    sections = split_sections(text, PROBE_NAME)
    conf = read_confs(sections, PROBE_NAME, text)
    node_env = read_node_env(sections, PROBE_NAME, text)
    writable = key_values(sections.require("writable", PROBE_NAME).text, "\t", PROBE_NAME)
    exists = sections.facts.get("ckpt_exists")
    free, fs, df_error = None, "", ""
    if exists == "1":
        free, fs, df_error = _df(sections.require("df", PROBE_NAME))
    gpus = sections.require("gpus", PROBE_NAME)
    count, gpu_error = None, ""
    if gpus.rc is None:
        gpu_error = "nvidia-smi output cut off"
    elif gpus.rc != 0:
        gpu_error = (
            f"nvidia-smi exited {gpus.rc}"
            + (f": {first_line(gpus.text)}" if gpus.text.strip() else "")
            + (" (not installed)" if gpus.rc == 127 else "")
        )
    else:
        count = len(parse_query_gpu(gpus.text, ("index",))) if gpus.text.strip() else 0
    resume = sections.facts.get("resume", "").strip()
    if resume.startswith("entry "):
        resume = "entry " + unescaped(resume[len("entry ") :], PROBE_NAME, text)
    return JobNodeFacts(
        node_env,
        conf,
        writable,
        None if exists is None else exists == "1",
        free,
        fs,
        df_error,
        resume,
        count,
        gpu_error,
        ckpt_not_dir=exists == "notdir",
        ckpt_fstype=sections.facts.get("ckpt_fstype", "").strip(),
        checked_as=_checked_as(sections.facts.get("checked_as", ""), text),
    )


def _checked_as(fact: str, text: str) -> str:
    return unescaped(fact.strip(), PROBE_NAME, text) if fact.strip() else ""


def _df(section) -> tuple[int | None, str, str]:
    """`df -P -k DIR`: a header, then 'Filesystem 1024-blocks Used Available Capacity Mounted-on'."""
    if section.rc != 0:
        return None, "", f"df exited {section.rc}: {first_line(section.text)}"
    lines = [ln for ln in section.text.splitlines() if ln.strip()]
    if len(lines) != 2 or not lines[0].startswith("Filesystem"):
        raise ParseError("df -P", "expected a header and one line", section.text)
    words = lines[1].split()
    if len(words) < 6 or not words[3].isdigit():
        raise ParseError("df -P", f"cannot read the available space in {lines[1]!r}", section.text)
    return int(words[3]) * 1024, f"{words[0]} on {' '.join(words[5:])}", ""
