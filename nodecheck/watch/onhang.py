"""What --on-hang does to a hung job: scancel / scontrol requeue in Slurm mode, SIGTERM to the matched
processes on each node with an inventory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from nodecheck.core.model import Node, Outcome, Probe, excerpt, one_line
from nodecheck.core.redact import redact_text

CANCEL_TIMEOUT_S = 10.0

# SIGTERM to the job's processes on a node: pgrep -f with the pattern as a positional argument (never
# inside the script). This shell, its ancestors (the SSH session's shell, env, timeout: their command
# lines hold the pattern) and its own children (the pipeline's subshell) are never signalled.
CANCEL_SCRIPT = r"""
me=$$ skip=' ' p=$$
while [ -n "$p" ] && [ "$p" -gt 1 ] 2>/dev/null; do
  skip="$skip$p "
  p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)
done
n=0
for pid in $(pgrep -f -- "$1"); do
  case "$skip" in *" $pid "*) continue;; esac
  [ "$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)" = "$me" ] && continue
  args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)
  if kill -TERM "$pid" 2>/dev/null; then echo "signalled $pid $args"; n=$((n + 1))
  else echo "failed $pid $args"; fi
done
echo "@@nodecheck signalled $n"
"""


def cancel_probe(pattern: str) -> Probe:
    return Probe(
        name="watch-cancel",
        argv=("sh", "-c", CANCEL_SCRIPT, "nodecheck-watch-cancel", pattern),
        timeout_s=CANCEL_TIMEOUT_S,
    )


class OnHang:
    """What --on-hang does: scancel / scontrol requeue in Slurm mode; SIGTERM to the matched processes
    on each node with an inventory. act() returns {"action", "ok", "result", "nodes"?}, never raises."""

    def __init__(
        self,
        action: str,
        *,
        slurm=None,
        job_id: str | None = None,
        pattern: str | None = None,
        transport=None,
        fanout: int = 64,
    ) -> None:
        self.action, self.slurm, self.job_id = action, slurm, job_id
        self.pattern, self.transport, self.fanout = pattern, transport, fanout

    def act(self, nodes: Sequence[Node], stop: threading.Event) -> dict:
        if self.slurm is not None:
            return self._slurm()
        return self._signal(nodes, stop)

    def _slurm(self) -> dict:
        from nodecheck.app.slurm import SlurmError

        verb = {"cancel": "scancel", "requeue": "scontrol requeue"}[self.action]
        try:
            (self.slurm.cancel if self.action == "cancel" else self.slurm.requeue)(self.job_id)
        except SlurmError as e:
            return {"action": self.action, "ok": False, "result": f"{verb} {self.job_id} failed: {one_line(str(e))}"}
        return {"action": self.action, "ok": True, "result": f"{verb} {self.job_id}: done"}

    def _signal(self, nodes: Sequence[Node], stop: threading.Event) -> dict:
        from nodecheck.transport.fanout import run_probes

        probe = cancel_probe(self.pattern or "")
        done = run_probes(
            self.transport,
            {n: [probe] for n in nodes},
            fanout=self.fanout,
            deadline=time.monotonic() + CANCEL_TIMEOUT_S,
            stop=stop,
        )
        per_node, ok = {}, True
        for n in nodes:
            c = done.captures[(n.name, probe.name)]
            if c.outcome is Outcome.EXITED and c.exit_code == 0:
                # a rank's command line may carry a token (--hf-token X): the event and alerts keep it masked
                lines = [
                    excerpt(redact_text(ln), 500)
                    for ln in c.stdout.split("\n")
                    if ln.startswith(("signalled ", "failed "))
                ]
                per_node[n.name] = lines
                ok = ok and not any(ln.startswith("failed ") for ln in lines)
            else:
                per_node[n.name] = [excerpt(redact_text(f"{c.outcome.value}: {c.detail or c.stderr.strip()}"), 500)]
                ok = False
        count = sum(1 for lines in per_node.values() for ln in lines if ln.startswith("signalled "))
        return {
            "action": self.action,
            "ok": ok,
            "nodes": per_node,
            "result": f"SIGTERM to {count} process(es) matching {self.pattern!r} on {len(nodes)} node(s)"
            + ("" if ok else "; some could not be signalled (see nodes)"),
        }
