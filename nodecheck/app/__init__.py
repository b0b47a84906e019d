"""What the commands share (transports from arguments, targets, signals, publishing a report, the job's
user, defaults) and the run, facts, baseline and checks commands."""
