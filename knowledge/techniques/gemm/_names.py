"""The regions that one GEMM technique adds to a kernel and others look for: spelled once here, so
that the technique that writes a region and those that test for it (to refuse, to build on it or
to keep clear of it) cannot drift apart. Regions only one module reads stay in that module; the
seed's own regions (config, params, tile, ...) are the seed's and are named where they are used."""

LAYOUT = "layout"  # layout_prepass: host copies of the operands in prepare
PREPASS = "prepass"  # fp16_prepass: the conversion call in prepare
PREPASS_KERNEL = "prepass_kernel"  # fp16_prepass: the converter kernel and its host function
DESCRIPTORS = "descriptors"  # tma_descriptors: the operand and output descriptors
SPLIT_K_PID = "split_k_pid"  # split_k with a host reduction: the K slice of the work id
SPLIT_K_REDUCE = "split_k_reduce"  # split_k reduced in the kernel (NVIDIA): the last slice's sum
STREAM_K_SCHEDULE = "stream_k_schedule"  # stream_k: each program's range of K blocks
TUNING = "tuning"  # in_submission_tuning: the settings and the tuner
LAUNCH_CACHE = "launch_cache"  # lean_host: the compiled launchers
XCD_REMAP = "xcd_remap"  # xcd_remap: the work ids renumbered per XCD
AMD_KNOBS = "amd_knobs"  # amd_knobs: ROCm launch options in select_config
