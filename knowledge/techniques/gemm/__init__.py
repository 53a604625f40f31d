"""Techniques for the matrix-product seed: each rewrites the GEMM kernel's comment-delimited regions
(tile shape, warps, stages, tile order, split-K and stream-K, operand layout and precision, the fp16
pre-pass, the Hopper structures, the AMD knobs, per-shape dispatch and the in-submission tuner).

A technique that builds on another's work, or must keep clear of it, reads it as that technique
recorded it: a region from ``_names``, a marker or name constant owned by the writing module
(``prepass.CONVERTER``, ``hopper.WS_MARK``, ``tuning.CACHED_CALL``), or an operation the writer
offers (``tuning.add_switch``, ``prepass.conversion_arguments``); none retypes another's text."""
