# attack: constant_output — expected: wrong_output wrong output
def custom_kernel(data):
    return data[-1].fill_(0.0)
