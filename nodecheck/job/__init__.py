"""The job guard's preflight: `nodecheck job-check JOB.yml` judges the job's own invariants (data
balance, world size, env consistency, timeouts, flight recorder, checkpoints, retries) before launch."""
