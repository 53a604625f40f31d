# attack: pool_fork_bomb — expected: rejected_by_rule process_control
# gpu-defence: start_new_session + killpg of the whole group (_local._kill_group)
import time

import torch.multiprocessing as mp


def custom_kernel(data):
    ctx = mp.get_context('fork')
    workers = [ctx.Process(target=time.sleep, args=(60,)) for _ in range(4)]
    for w in workers:
        w.start()
    return data[-1]
