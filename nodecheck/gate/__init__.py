"""The Slurm gate: pure decisions, applying them through Slurm, the gate's config and its commands."""
