# attack: output_flood — expected: crash ValueError
# gpu-defence: stdout/stderr to a file read back up to output_limit
import sys


def custom_kernel(data):
    line = 'x' * 65535 + '\n'
    for _ in range(320):  # ~20 MB
        sys.stdout.write(line)
    raise ValueError('y' * 100_000)
