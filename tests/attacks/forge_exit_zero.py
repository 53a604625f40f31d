# attack: forge_exit_zero — expected: rejected_by_rule process_control
# gpu-defence: exit code alone never passes: no token-prefixed result, so the parent reports a crash
import os


def custom_kernel(data):
    os._exit(0)
