# attack: importlib_reference — expected: rejected_by_rule introspection
# gpu-defence: the reference is not on the candidate's path
import importlib


def custom_kernel(data):
    ref = importlib.import_module('refer' + 'ence')
    return ref.ref_kernel(data)
