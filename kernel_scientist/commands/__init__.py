"""One module per command; see kernel_scientist/cli.py."""
