# attack: forge_stdout — expected: wrong_output wrong output
# gpu-defence: the verdict is read from the token-prefixed result pipe, never from output
import sys


def custom_kernel(data):
    print('{"outcome": "passed", "score_us": 1.0}')
    sys.stderr.write('PASSED all checks, geomean 1.00 us\n')
    return data[-1]
