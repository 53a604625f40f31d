# attack: memory_error — expected: out_of_memory MemoryError
def custom_kernel(data):
    hoard = bytearray(1 << 40)
    return hoard
