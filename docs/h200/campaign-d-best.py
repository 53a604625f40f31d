#!POPCORN leaderboard amd-fp8-mm
#!POPCORN gpus H200
# Exported by kernel-scientist unknown (not installed) from campaign 'amd-fp8-mm-h200' (seed 1, blackboard campaign-d.sqlite).
# Kernel 15 (evaluated): 207.6 us geometric mean over 18 ranked shapes (measured on NVIDIA H200).
# Protocol: measured on NVIDIA H200 (device events per call, cross-checked with the host clock between device-wide synchronizes; L2 flushed and fresh inputs before every call; every output re-checked).
# Lineage: kernel 1 -> kernel 2 -> kernel 5 -> kernel 9 -> kernel 15.
"""amd-fp8-mm submission evolved by kernel-scientist from the task's seed kernel.

Changes applied to kernel 1 (seed, 388.1 us), in order:
  1. kernel 2 (H1, engineer-1): Compound plan (two or three structural techniques together):
     fp16 pre-pass + TMA descriptors + tune 6 settings per shape -> 328.1 us
  2. kernel 5 (H6, engineer-1, borrowing from kernel 1): Compound plan (two or three structural
     techniques together): GROUP_M=8 + NUM_SMS=132 + direct compiled launch -> 215.3 us
  3. kernel 9 (H12, engineer-2, borrowing from kernel 3): Compound plan (two or three structural
     techniques together): GROUP_M=4 + NUM_SMS=264 -> 214.1 us
  4. kernel 15 (H20, engineer-2, borrowing from kernel 8): Persistent kernel (one program per CU
     walks the tiles): NUM_SMS=132 -> 207.6 us

Score: 207.6 us geometric mean over 18 ranked shapes (measured on NVIDIA H200).

The ``# region: NAME`` / ``# endregion: NAME`` comment lines mark the parts that kernel-scientist's
technique catalogue rewrites; keep them when editing by hand.
"""

import time

import torch
import triton
import triton.language as tl

# region: config
BLOCK_M = 64
BLOCK_N = 64
BLOCK_K = 128
NUM_WARPS = 4
NUM_STAGES = 2
GROUP_M = 4
NUM_SMS = 132
# endregion: config


# region: select_config
def select_config(m: int, n: int, k: int) -> dict:
    """Launch settings for one shape: the kernel's constexprs plus num_warps / num_stages."""
    cfg = {
        "BLOCK_M": BLOCK_M,
        "BLOCK_N": BLOCK_N,
        "BLOCK_K": BLOCK_K,
        "num_warps": NUM_WARPS,
        "num_stages": NUM_STAGES,
        "GROUP_M": GROUP_M,
        "NUM_SMS": NUM_SMS,
    }
    return cfg
# endregion: select_config
# region: launch_cache
_COMPILED = {}  # (kernel, grid, settings, integer arguments) -> its compiled launcher; never a result


def _direct(compiled, grid):
    """The compiled kernel's own C launcher with its fixed arguments bound: a later call passes
    only the current stream and the kernel's arguments. Triton's runner would also look up the
    device and build launch metadata for profiling hooks on every call. None where this Triton's
    compiled kernel has no such launcher (then its runner is used)."""
    run, function = getattr(compiled, "run", None), getattr(compiled, "function", None)
    driver = getattr(getattr(triton.runtime, "driver", None), "active", None)
    if run is None or function is None or driver is None or not torch.cuda.is_available():
        return None
    device = torch.cuda.current_device()
    stream_of = driver.get_current_stream
    g0, g1, g2 = tuple(grid) + (1,) * (3 - len(grid))
    packed = compiled.packed_metadata

    def launch(*args):
        run(g0, g1, g2, stream_of(device), function, packed, None, None, None, *args)

    return launch


def launch_cached(kernel, grid, cfg, *args):
    """Launch through Triton's JIT the first time, then straight through the compiled kernel:
    no argument binding, specialisation or cache-key hashing in Python on later calls. Integer
    arguments are part of the key because Triton specialises on them (== 1, multiple of 16)."""
    key = (kernel, grid, tuple(cfg.items()), tuple(x for x in args if isinstance(x, int)))
    cached = _COMPILED.get(key)
    if cached is not None:
        runner, consts = cached
        if runner is not None:
            runner(*args, *consts)
            return
    compiled = kernel[grid](*args, **cfg)
    if cached is None:
        runner, consts = None, ()
        names = getattr(kernel, "arg_names", None)
        if compiled is not None and names is not None and all(n in cfg for n in names[len(args):]):
            if hasattr(compiled, "_init_handles"):
                compiled._init_handles()  # loads the module: function and launcher exist from here
            runner = _direct(compiled, grid) or compiled[tuple(grid) + (1,) * (3 - len(grid))]
            consts = tuple(cfg[n] for n in names[len(args):])
        _COMPILED[key] = (runner, consts)  # None: this Triton (or its interpreter) launches by JIT only
# endregion: launch_cache
# region: tuning
TUNING_SPACE = ((128, 128, 8, 3), (128, 128, 4, 3), (64, 128, 4, 4), (128, 64, 4, 4), (64, 64, 4, 4), (128, 256, 8, 2))
TUNING_BUDGET_S = 30.0  # per shape: stop trying settings after this long (compiles included)
_TUNED = {}  # (m, n, k) -> the fastest launch settings; settings only, never a result


def tuned(key, cfg, launch):
    """The fastest of TUNING_SPACE for one shape, timed with device events on its first call;
    settings that fail to compile (too much shared memory, say) are skipped."""
    best = _TUNED.get(key)
    if best is not None:
        return best
    if not torch.cuda.is_available():  # the CPU interpreter: keep the defaults
        _TUNED[key] = cfg
        return cfg
    began = time.perf_counter()
    timings = []
    for block_m, block_n, warps, stages in TUNING_SPACE:
        if time.perf_counter() - began > TUNING_BUDGET_S:
            break
        trial = dict(cfg, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages)
        try:
            launch(trial)  # compiles on first use
        except Exception:  # noqa: BLE001 - a setting this GPU cannot run is simply not a candidate
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            launch(trial)
        end.record()
        end.synchronize()
        timings.append((start.elapsed_time(end), len(timings), trial))
    best = min(timings)[2] if timings else cfg
    _TUNED[key] = best
    return best
# endregion: tuning
# region: tma_allocator
_SCRATCH = {}  # (size, stream) -> one buffer: descriptor scratch only, never a result


def _descriptor_scratch(size: int, alignment: int, stream):
    """Global memory for the descriptors a kernel builds on the device. Triton asks on every
    launch; launches on one stream run in order, so one buffer per size and stream serves them all
    and no call pays an allocation."""
    key = (size, stream)
    buffer = _SCRATCH.get(key)
    if buffer is None:
        buffer = _SCRATCH[key] = torch.empty(size, dtype=torch.int8, device="cuda")
    return buffer


if torch.cuda.is_available():
    triton.set_allocator(_descriptor_scratch)
# endregion: tma_allocator
# region: prepass_kernel
@triton.jit
def fp8_to_fp16_kernel(a_ptr, b_ptr, a16_ptr, b16_ptr, NA, NB, BLOCK: tl.constexpr):
    """Element-for-element fp8 -> fp16 of both operands in one launch (e4m3 fits fp16 exactly)."""
    pid = tl.program_id(0)
    blocks_a = tl.cdiv(NA, BLOCK)
    if pid < blocks_a:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < NA
        tl.store(a16_ptr + offs, tl.load(a_ptr + offs, mask=mask).to(tl.float16), mask=mask)
    else:
        offs = (pid - blocks_a) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < NB
        tl.store(b16_ptr + offs, tl.load(b_ptr + offs, mask=mask).to(tl.float16), mask=mask)


_FP16_SCRATCH = {}  # (shapes, strides, device) -> the two fp16 buffers; scratch only, never a result


def to_fp16(a, b):
    """fp16 copies of a and b with the same strides, in buffers reused while the shape repeats."""
    key = (a.shape, a.stride(), b.shape, b.stride(), a.device)
    buffers = _FP16_SCRATCH.get(key)
    if buffers is None:
        _FP16_SCRATCH.clear()
        buffers = (torch.empty_strided(a.shape, a.stride(), dtype=torch.float16, device=a.device),
                   torch.empty_strided(b.shape, b.stride(), dtype=torch.float16, device=b.device))
        _FP16_SCRATCH[key] = buffers
    a16, b16 = buffers
    na, nb = a.numel(), b.numel()
    grid = (triton.cdiv(na, 4096) + triton.cdiv(nb, 4096),)
    launch_cached(fp8_to_fp16_kernel, grid, {"BLOCK": 4096}, a, b, a16, b16, na, nb)
    return a16, b16
# endregion: prepass_kernel


@triton.jit
def fp8_gemm_kernel(
    # region: params
    a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk,
    stride_asm, stride_ask, stride_bsn, stride_bsk,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr,
    # endregion: params
):
    # region: work_preamble
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_work = num_pid_m * num_pid_n
    # region: descriptors
    # The operands are column-major: [K, M] and [K, N] row-major views, unit inner stride.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[stride_ak, 1], block_shape=[BLOCK_K, BLOCK_M])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])
    # endregion: descriptors
    # endregion: work_preamble
    # region: tile
    # Persistent: NUM_SMS programs stride through the work list.
    for work_id in range(tl.program_id(0), num_work, NUM_SMS):
        pid = work_id
        # region: pid_map
        # region: tile_order
        # Groups of GROUP_M tile rows are walked column by column, so the programs in flight
        # reuse a few row blocks of a and a few column blocks of b from L2.
        group_size = GROUP_M * num_pid_n
        first_m = (pid // group_size) * GROUP_M
        group_rows = tl.minimum(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (pid % group_size) % group_rows
        pid_n = (pid % group_size) // group_rows
        # endregion: tile_order
        # endregion: pid_map
        # region: k_bounds
        k_lo = 0
        k_hi = K
        # endregion: k_bounds
        # region: offsets
        # Rows past M (or columns past N) wrap around instead of being masked: they read valid
        # memory and their results are dropped by the store mask.
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        # endregion: offsets
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        # region: k_loop
        for k0 in range(k_lo, k_hi, BLOCK_K):
            # region: loads
            a = a_desc.load([k0, pid_m * BLOCK_M]).T
            b = b_desc.load([k0, pid_n * BLOCK_N])
            # One scale block per 128 K elements; b's scales also change every 128 columns.
            a_s = tl.load(as_ptr + offs_am * stride_asm + (k0 // 128) * stride_ask)
            b_s = tl.load(bs_ptr + (offs_bn // 128) * stride_bsn + (k0 // 128) * stride_bsk)
            # endregion: loads
            # region: dot
            # max_num_imprecise_acc=0 asks for full fp32 accumulation: Hopper's fp8 MMA otherwise
            # accumulates in reduced precision and misses the tolerance; MI300X ignores it.
            partial = tl.dot(a, b)
            acc += partial * a_s[:, None] * b_s[None, :]
            # endregion: dot
        # endregion: k_loop
        # region: epilogue
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))
        # endregion: epilogue
    # endregion: tile


def custom_kernel(data):
    # region: prepare
    a, b, a_scale, b_scale, c = data
    # region: fp8_flavour
    # The public generator draws e4m3fnuz on every platform, and Triton on NVIDIA cannot load it.
    # Same bit layout, exponent bias 8 instead of 7: every fnuz code but three reads as an e4m3fn
    # code of exactly twice its value (0x80, fnuz's NaN, would read as -0; 0x7F/0xFF, fnuz's
    # +-240, as NaN; a standard normal never draws them). So the bytes are reinterpreted and the
    # halving of both operands is folded into a's scales. ROCm loads fnuz natively.
    if a.dtype == torch.float8_e4m3fnuz and not torch.version.hip:
        a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)
        a_scale = a_scale * 0.25
    # endregion: fp8_flavour
    m, k = a.shape
    n = b.shape[0]
    cfg = select_config(m, n, k)
    # region: prepass
    a, b = to_fp16(a, b)  # one bandwidth-bound pass; the GEMM then multiplies fp16 tiles
    # endregion: prepass
    if a.stride(0) != 1 or b.stride(0) != 1 or c.stride(1) != 1:
        raise ValueError("this kernel's tensor descriptors need column-major a and b and a row-major c")
    # endregion: prepare
    # region: output
    out = c
    # endregion: output
    def launch(cfg):
        # region: grid
        num_work = triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"])
        grid = (min(cfg["NUM_SMS"], num_work),)
        # endregion: grid
        # region: launch
        launch_cached(fp8_gemm_kernel, grid, cfg,
            a, b, a_scale, b_scale, out,
            m, n, k,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            a_scale.stride(0), a_scale.stride(1), b_scale.stride(0), b_scale.stride(1),
            out.stride(-2), out.stride(-1),
        )
        # endregion: launch
    cfg = tuned((m, n, k), cfg, launch)
    launch(cfg)
    # region: finish
    return c
    # endregion: finish
