# attack: giant_allocation — expected: out_of_memory can't allocate memory
# gpu-defence: torch.cuda.OutOfMemoryError mapped to out_of_memory
import torch


def custom_kernel(data):
    hoard = torch.empty(1 << 40, dtype=torch.uint8)  # 1 TiB
    return hoard
