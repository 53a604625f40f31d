# attack: infinite_loop — expected: timeout exceeded
# gpu-defence: LocalBackend timeout_s kills the process group
def custom_kernel(data):
    while True:
        pass
