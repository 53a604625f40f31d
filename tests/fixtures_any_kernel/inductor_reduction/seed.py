from task import input_t, output_t


def custom_kernel(x: input_t) -> output_t:
    return (x * x).sum(dim=1).sqrt()
