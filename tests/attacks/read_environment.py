# attack: read_environment — expected: rejected_by_rule environment
# gpu-defence: scrubbed environment (_sandbox.scrubbed_env) for the harness process
import os


def custom_kernel(data):
    print(os.environ.get('ANTHROPIC_API_KEY'), os.environ.get('KS_DB'))
    return data[-1]
