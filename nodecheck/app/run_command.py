"""`nodecheck run`: validate everything, run the playbook on the nodes, report."""

from __future__ import annotations

import sys
from argparse import Namespace

from nodecheck.app import transports
from nodecheck.app.job_user import job_user_of, with_job_user
from nodecheck.app.progress_view import terminal_progress, wanted
from nodecheck.app.publish import publish
from nodecheck.app.signals import stop_on_signals
from nodecheck.app.targets import own_job, select_targets


def run_command(args: Namespace) -> int:
    """`nodecheck run`: validate everything, run, then report; returns the exit code."""
    from nodecheck.config.playbook import load_playbook
    from nodecheck.run import runner as runner

    playbook = load_playbook(args.playbook, tuple(args.pins), getattr(args, "job_env", None))
    if getattr(args, "job_env", None):  # the owner of the file as the playbook read it, not a later stat
        playbook = with_job_user(playbook, job_user_of(playbook.job_env_owner))
    nodes, excluded, transport = select_targets(args, playbook)
    if not args.local:
        transports.ensure_open_files(min(args.fanout, len(nodes)))
    with (
        terminal_progress(wanted(args)) as progress,
        stop_on_signals() as stop,
    ):
        report = runner.run(
            playbook,
            nodes,
            transport,
            fanout=args.fanout,
            deadline_s=args.deadline,
            inventory=args.inventory,
            progress=progress,
            stop=stop,
            excluded=[n.name for n in excluded],
            allow_disruptive=args.allow_disruptive,
            own_job=own_job(args),
        )
    for warning in getattr(transport, "warnings", list)():
        print(f"nodecheck: warning: {warning}", file=sys.stderr)
    return publish(report, args)
