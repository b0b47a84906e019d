"""What the commands share: transports from arguments, signals, publishing a report, defaults; the run, facts, baseline and checks commands."""
