# attack: forge_result_file — expected: rejected_by_rule process_control
# gpu-defence: result pipe with a per-run token; the parent never reads a file the candidate can write
import os
import posix

import msgspec


def custom_kernel(data):
    # Write the sandbox's result file with no checks and no captures, then leave before the harness can.
    fd = os.open('.result', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, msgspec.msgpack.encode({'status': 'ok', 'reason': '', 'checks': [], 'captures': []}))
    os.close(fd)
    posix._exit(0)
