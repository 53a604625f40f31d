"""`python -m kernel_scientist`: the same command line as `kernel-scientist`."""

import sys

from kernel_scientist.cli import main

sys.exit(main())
