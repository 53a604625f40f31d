# Correct and slow: torch reductions.
from task import input_t, output_t


def custom_kernel(x: input_t) -> output_t:
    return x.sum(dim=1), x.amax(dim=1)
