# attack: forge_fd_write — expected: rejected_by_rule file_write
# gpu-defence: result pipe set non-inheritable and prefixed with a per-run token (_gpu_harness.main)
import os


def custom_kernel(data):
    for fd in (1, 2, 3, 4, 5):
        try:
            os.write(fd, b'passed\n')
        except OSError:
            pass
    return data[-1]
