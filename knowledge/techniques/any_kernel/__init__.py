"""Techniques for any Triton kernel, found by its syntax rather than by regions: block-size literals
and the launch's ``num_warps`` and ``num_stages``."""
