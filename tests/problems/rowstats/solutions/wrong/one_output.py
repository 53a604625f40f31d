# Wrong: returns only the sums, not the (sums, maxima) tuple the folder defines.
from task import input_t, output_t


def custom_kernel(x: input_t) -> output_t:
    return x.sum(dim=1)
