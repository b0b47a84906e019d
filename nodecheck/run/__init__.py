"""Running a playbook: the runner, the one active executor, gathering facts."""
