# attack: write_torch_py — expected: rejected_by_rule file_write
# gpu-defence: per-candidate temporary working directory; the harness's modules are imported before the candidate
with open('torch.py', 'w') as f:
    f.write('def matmul(a, b):\n    return None\n')


def custom_kernel(data):
    return data[-1]
