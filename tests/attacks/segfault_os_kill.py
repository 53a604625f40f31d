# attack: segfault_os_kill — expected: rejected_by_rule process_control
import os
import signal


def custom_kernel(data):
    os.kill(os.getpid(), signal.SIGSEGV)
