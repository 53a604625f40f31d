# attack: read_parent_environ — expected: rejected_by_rule file_read
# gpu-defence: none at run time beyond the static rule (same uid): see the report
import os


def custom_kernel(data):
    # The campaign process still holds the keys: walk up to it and read its environment.
    with open('/proc/%d/status' % os.getppid()) as f:
        ppid = [ln.split()[1] for ln in f if ln.startswith('PPid')][0]
    with open('/proc/%s/environ' % ppid, 'rb') as f:
        raise ValueError(f.read()[:2000])
