"""`python -m kernel_scientist`: the same command line as `kernel-scientist`."""

import sys

try:
    from kernel_scientist.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line itself loads: the same line `main` gives
    print("kernel-scientist: interrupted while starting; nothing was written", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
