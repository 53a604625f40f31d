"""Techniques for the host path, what a leaderboard's per-call timing counts besides the GPU's work:
a direct launch of the compiled kernel (any kernel) and replaying recorded launches (the GEMM seed)."""
