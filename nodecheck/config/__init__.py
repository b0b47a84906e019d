"""What an operator writes: inventory, playbooks, the YAML source with line numbers, a job's environment file."""
