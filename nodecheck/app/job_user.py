"""Whose files a job names are read as: the job's user, from who handed nodecheck the job (the
owner of its file), Slurm, or the node Prolog's environment."""

from __future__ import annotations

import os

# A path in a job's environment (NCCL_CONF_FILE) is read on the node by root, so only as the job's user
# could read it (probes/shell.py job_file): their own file, else root's readable by everyone. The job's
# user is whoever hands nodecheck the environment: the owner of the file it came from (a user running
# nodecheck on their own job owns theirs). Root's copy says nothing about whose job it is (an operator
# copied a user's file): no user.


def job_user_of(owner_uid: int | None, slurm_user: str = "") -> str:
    """The job's user for run --job-env, job-check, watch and forensics: the owner of the file that
    names the job's files (the --job-env file, JOB.yml, the watch config), as that file was read (its
    descriptor's fstat: a second look at the path could find a root-owned file the user put there
    since), when it is not root (a user's file names only that user's own files, whoever's job it
    checks); else the Slurm job's user (squeue's UserName, which the job cannot forge). "" for root,
    none, or a name that is not a user name."""
    from nodecheck.probes.shell import JOB_USER, JOB_USER_MAX

    if owner_uid is not None and owner_uid != 0:
        return str(owner_uid)
    user = slurm_user or ""
    return user if user not in ("root", "0") and JOB_USER.fullmatch(user) and len(user) <= JOB_USER_MAX else ""


def prolog_job_user() -> str:
    """The job's uid in the node Prolog: slurmd sets SLURM_JOB_UID there (not the job); "" for root's."""
    uid = os.environ.get("SLURM_JOB_UID", "")
    return uid if uid.isascii() and uid.isdigit() and int(uid) != 0 else ""


def with_job_user(playbook, user: str):
    """The playbook with `user` as the job's user of every check that reads the job's files
    (params `job_user`), where the playbook names none itself; the probes are made again, keeping
    their timeouts (a check's `timeout_s`)."""
    import dataclasses

    from nodecheck.probes.shell import JOB_USER, JOB_USER_MAX

    if not user:
        return playbook
    if not JOB_USER.fullmatch(user) or len(user) > JOB_USER_MAX:
        raise ValueError(f"not a uid or a user name: {user[:60]!r}")

    def again(made, old):
        return tuple(dataclasses.replace(p, timeout_s=o.timeout_s) for p, o in zip(made, old, strict=True))

    checks = []
    for c in playbook.checks:
        if "job_user" in type(c.params).model_fields and not c.params.job_user:
            params = c.params.model_copy(update={"job_user": user})
            c = dataclasses.replace(
                c,
                params=params,
                probes=again(c.spec.probes_for(params), c.probes),
                after=again(c.spec.after_probes_for(params), c.after),
            )
        checks.append(c)
    return dataclasses.replace(playbook, checks=tuple(checks))
