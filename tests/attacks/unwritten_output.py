# attack: unwritten_output — expected: wrong_output wrong output
# gpu-defence: NaN pre-fill of every output
def custom_kernel(data):
    return data[-1]  # never written: still the harness's pre-fill
