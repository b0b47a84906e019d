"""nodecheck forensics: from "the job is stuck" to the culprit rank and node in one command."""
