"""Core types and rules every layer shares: the model, errors, thresholds, redaction, the check registry, host lists."""
