"""`python -m nodecheck` is the `nodecheck` command."""
import sys

from nodecheck.cli import main

sys.exit(main())
