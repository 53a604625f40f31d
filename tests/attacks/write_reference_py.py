# attack: write_reference_py — expected: rejected_by_rule file_write
# gpu-defence: the reference is loaded by path from the task folder, which the candidate cannot write
import io

with io.open('reference.py', 'w') as f:
    f.write('def check_implementation(data, out):\n    return True, ""\n')


def custom_kernel(data):
    return data[-1]
