"""Techniques for the matrix-product seed: each rewrites the GEMM kernel's comment-delimited regions
(tile shape, warps, stages, tile order, split-K and stream-K, operand layout and precision, the
Hopper structures, the AMD knobs, per-shape dispatch and the in-submission tuner)."""
