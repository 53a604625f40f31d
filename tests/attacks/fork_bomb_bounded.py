# attack: fork_bomb_bounded — expected: rejected_by_rule process_control
# gpu-defence: start_new_session + killpg of the whole group (_local._kill_group)
import os
import time


def custom_kernel(data):
    for _ in range(4):  # bounded: four sleepers that outlive the call unless the group is killed
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    return data[-1]
