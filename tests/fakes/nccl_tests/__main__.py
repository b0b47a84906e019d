"""Entry of the fake nccl-tests: `python3 -I tests/fakes/nccl_tests NODE NODE_ADDRESS NET STATE_JSON MODE
ARGV0 [args]`. On a simulated node the harness copies this file to <data>/nccl_tests.py, beside the
package's copy <data>/nccl_tests/, and the node's wrappers run that file (tests and the harness find
the fake's processes by it)."""

import os
import sys

if not __package__:
    # python3 -I puts neither this file's directory nor the current one on sys.path: add the
    # directory that holds the package (beside this file on a node, above it in the repository)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here if os.path.isdir(os.path.join(here, "nccl_tests")) else os.path.dirname(here))

from nccl_tests.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
