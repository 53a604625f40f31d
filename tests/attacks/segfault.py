# attack: segfault — expected: crash SIGSEGV
# gpu-defence: fresh process per candidate; exit status read by the parent
import faulthandler


def custom_kernel(data):
    faulthandler._sigsegv()  # a real SIGSEGV in C
