# attack: import_reference — expected: rejected_by_rule harness_import
# gpu-defence: the reference is loaded under a private name and dropped from sys.modules before the import
from reference import ref_kernel


def custom_kernel(data):
    return ref_kernel(data)
