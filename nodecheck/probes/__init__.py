"""Self-contained probe scripts sent to nodes (stdin of `python3 -`) or run in-process with --local."""
