"""nodecheck's simulated cluster (real sshd per node, fake GPU/IB tools). See README.md here."""
