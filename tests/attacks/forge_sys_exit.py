# attack: forge_sys_exit — expected: crash SystemExit
# gpu-defence: exit code alone never passes
import sys


def custom_kernel(data):
    sys.exit(0)
