"""An analytic timing model of Triton launches on MI300X (and Hopper), built for the FP8 block-scaled
GEMM, with a roofline for launches that do no matrix work.

What it is for: ranking candidate kernels plausibly when no GPU is at hand. It turns each captured
launch (``_wire.Launch``) into a time. It is not fitted to measurements; scripts/calibrate_model.py
prints how far it sits from the H200 anchors (docs/task-facts.md), as an honesty check.

What it captures, per GEMM launch (a launch with ``tl.dot`` and BLOCK_M/N/K constexprs), from the
task's (m, n, k):
- tiles, split-K units and wave quantization over the CUs; persistent launches (NUM_SMS, or fewer
  programs than units) loop over units and pay the per-tile prologue once instead of per round;
- occupancy from LDS (num_stages * (BM*BK + BN*BK) * element bytes against 64 KB; over the limit
  is a compile failure, as on the device), registers (the fp32 accumulator plus double-buffered
  operands over the lanes) and the wave limit; spills halve the rate;
- matrix-core efficiency from tile intensity BM*BN/(BM+BN), K step, SIMD coverage and latency
  hiding by resident waves, times a ceiling (~72% of peak, what well-tuned MFMA loops reach);
- precision: fp8 at the fp8 rate; operands upcast to bf16 at the bf16 rate; fp32 at the fp32 matrix
  rate. The block scales cost fp32 vector work every 128 of K; Hopper's precise accumulation
  (``max_num_imprecise_acc=0``) serialises wgmma with its fp32 promotion (an assumed 0.5x);
  MI300X accumulates fp8 in fp32 natively, so precision is free there;
- operands that are not K-contiguous (the task's column-major inputs loaded as they are) must be
  transposed through LDS byte by byte: an assumed 0.4x matrix-core rate per fp8 operand;
- memory: L2 traffic from the tiles' loads (64-byte request granularity), and traffic below L2 from
  the launch order: the first round of concurrent tiles is enumerated (grouped order with GROUP_M,
  row-major or the 2D grid otherwise), tiles are dealt round-robin to the 8 XCDs' separate L2s
  unless NUM_XCDS says the kernel remaps them, and only tiles on one XCD share loads. Compulsory
  bytes come from HBM, re-reads from the Infinity Cache on MI300X;
- overlap of loads and compute by num_stages; split-K's fp32 partial traffic (atomics at a quarter
  of L2 bandwidth); matrix_instr_nonkdim, kpack and waves_per_eu as small effects; ~4 us per launch.
Other launches (a GEMM's pre-passes, and every kernel of a task that is not a matrix product:
elementwise, reductions, stencils) get a roofline: their tensors' bytes over effective HBM
bandwidth, scaled down when too few warps are resident to saturate it, plus a latency per round of
programs and a launch (``memory_time_us``). Torch work recorded during capture is memory-bound too;
recorded matmuls run at 0.7 of their dtype's BLAS rate. A ``tl.dot`` launch on a task whose shapes
are not m, n, k cannot be modelled, and the report says so (``ModelUnsupported``).

What it ignores: clocks and power, LDS bank conflicts beyond the transpose term, instruction
scheduling, TLB effects, the real dispatch order of the hardware, any code inside the K loop other
than what the static features name (a kernel that does extra work per step gets it for free), and
correctness on the device. Its constants are stated guesses where marked; its errors are likely
tens of percent per shape, larger for unusual designs.
"""

from __future__ import annotations

import math
from typing import overload

import msgspec

from blackboard.records import Shape
from evaluator._devices import DeviceSpec
from evaluator._wire import Capture, Launch, TensorArg, TorchOp

MODEL_VERSION = "ks-analytic-gemm/0.1"

_CEILING = 0.72  # fraction of matrix peak that tuned MFMA/wgmma loops reach (estimate)
_TILE_HALF = 24.0  # tile intensity at which the tile reaches half its ceiling (estimate)
_K_STEP_HALF = 16.0  # K-loop overhead: BK at which the step runs at half efficiency (estimate)
_TRANSPOSE = {1: 0.4, 2: 0.6, 4: 0.8}  # matrix rate per non-K-contiguous operand, by element bytes
_HBM_EFF = 0.80  # achievable fraction of HBM peak (MI300X copies reach ~4.2 of 5.3 TB/s)
_L2_EFF = 0.70
_LLC_EFF = 0.60
_REQUEST_BYTES = 64  # L2 request granularity
_PROLOGUE_US = 1.0  # pipeline fill + epilogue per round of tiles, non-persistent
_PERSISTENT_PROLOGUE_US = 0.25  # per further tile of a persistent program (overlapped)
_ALU_OVERLAP = 0.5  # fraction of fp32 vector work hidden under matrix work
_OVERLAP = {1: 0.0, 2: 0.75}
_HOPPER_PRECISE = 0.5  # load/compute overlap by num_stages; 3 and more: 0.9
_SPILL = 0.5  # matrix rate when the accumulator and tiles spill registers (estimate)
# AMD launch options, as multipliers of the matrix rate (estimates from ROCm's tuning guides): 32x32
# MFMA instructions suit big per-warp tiles (at least 64x64 outputs per warp) and lose on small ones;
# 16x16 the other way round; kpack=2 packs fp8 operands for the MFMA (a small gain); waves_per_eu
# helps when the register budget it implies still holds the kernel's registers, else it spills.
_NONKDIM_32 = {True: 1.04, False: 0.92}  # keyed by "big per-warp tile"
_NONKDIM_16 = {True: 0.98, False: 1.02}
_KPACK_FP8 = 1.02
_WAVES_PER_EU = {True: 1.03, False: 0.9}  # keyed by "registers fit the waves_per_eu budget"
_UPCAST_BF16_RATE = 0.9  # bf16 rate after an in-kernel fp8 -> bf16 upcast (conversion work)
_VECTOR_EFF = 0.7  # achievable fraction of the vector fp32 peak for the scale-and-add work
_ATOMIC_L2_EFF = 0.25  # L2 bandwidth fraction of split-K atomics (read-modify-write, contended)


class ModelInfeasible(Exception):
    """The launch could not run on the device (e.g. it needs more LDS than a CU has)."""


class ModelUnsupported(Exception):
    """The model cannot time this launch (a ``tl.dot`` kernel on a task that is not a matrix
    product of m, n, k: there are no tiles to count). Said plainly instead of invented."""


class LaunchTime(msgspec.Struct, frozen=True):
    kernel: str
    kind: str  # "gemm" | "memory" | "torch"
    time_us: float
    detail: str = ""


@overload
def _const(launch: Launch, *names: str, default: int) -> int: ...
@overload
def _const(launch: Launch, *names: str, default: None = None) -> int | None: ...
def _const(launch: Launch, *names: str, default: int | None = None) -> int | None:
    for name in names:
        v = launch.constexprs.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(v)
    return default


def _operand(launch: Launch, rows: int, k: int, taken: set[str]) -> TensorArg | None:
    for t in launch.tensors:
        if t.name not in taken and len(t.shape) == 2 and sorted(t.shape) == sorted((rows, k)):
            taken.add(t.name)
            return t
    return None


def _k_contiguous(t: TensorArg | None, k: int) -> bool:
    if t is None:
        return True
    dim = 1 if t.shape[1] == k else 0
    return t.stride[dim] == 1 or t.shape[dim] == 1


def _tile_of(pid: int, launch: Launch, tm_count: int, tn_count: int, group_m: int) -> tuple[int, int]:
    """Which output tile a linear program id works on, by the kernels' usual conventions."""
    if group_m > 1:
        per_group = group_m * tn_count
        first = (pid // per_group) * group_m
        size = max(1, min(tm_count - first, group_m))
        return first + (pid % per_group) % size, (pid % per_group) // size
    g0, g1 = launch.grid[0], launch.grid[1]
    if g1 > 1:  # a 2D grid: x runs fastest
        x, y = pid % g0, pid // g0
        return (x, y) if g0 == tm_count or g0 != tn_count else (y, x)
    return pid // tn_count, pid % tn_count  # 1D row-major, as in Triton's tutorial


def _below_l2_fraction(launch: Launch, dev: DeviceSpec, tm_count: int, tn_count: int, split: int,
                       concurrent: int, bm: int, bn: int, group_m: int, remap: bool) -> float:
    """Share of tile loads that miss L2: enumerate the first round of concurrent units, deal them
    to L2 domains, and count distinct A row-blocks and B column-blocks per domain."""
    tiles = tm_count * tn_count
    domains = dev.l2_domains
    seen_a: list[set] = [set() for _ in range(domains)]
    seen_b: list[set] = [set() for _ in range(domains)]
    requested = 0
    per_domain = max(1, -(-concurrent // domains))
    for unit in range(concurrent):
        ks, pid = divmod(unit, tiles) if split > 1 else (0, unit)
        tm, tn = _tile_of(pid, launch, tm_count, tn_count, group_m)
        d = (unit // per_domain if remap else unit % domains) % domains
        seen_a[d].add((tm, ks))
        seen_b[d].add((tn, ks))
        requested += bm + bn
    loaded = sum(len(a) * bm + len(b) * bn for a, b in zip(seen_a, seen_b))
    return loaded / max(1, requested)


def _occupancy(kernel: str, dev: DeviceSpec, bm: int, bn: int, bk: int, warps: int, stages: int,
               elem: int) -> tuple[float, int]:
    """Registers per lane, and blocks resident per CU/SM (limited by LDS, registers and waves).
    Raises ModelInfeasible when one block needs more LDS than the device has."""
    lds = stages * (bm * bk + bn * bk) * elem
    if lds > dev.smem_kb * 1024:
        raise ModelInfeasible(f"{kernel}: out of resource: shared memory, required {lds}, hardware limit "
                              f"{dev.smem_kb * 1024} (BLOCK_M={bm} BLOCK_N={bn} BLOCK_K={bk} num_stages={stages}); "
                              "use smaller tiles or fewer stages")
    lanes = warps * dev.lanes
    regs = bm * bn / lanes + 2 * (bm + bn) * bk * elem / 4 / lanes + 24
    by_regs = int(dev.reg_file_kb * 256 // (min(regs, dev.regs_per_lane) * lanes))
    return regs, max(1, min(dev.smem_kb * 1024 // lds, by_regs, dev.max_waves_per_unit // warps))


def _amd_options(eff: float, launch: Launch, dev: DeviceSpec, *, big: bool, elem: int, regs: float) -> float:
    """``eff`` under the AMD launch options the launch sets (the constants' note)."""
    nonk = launch.extra.get("matrix_instr_nonkdim")
    if nonk == 32:
        eff *= _NONKDIM_32[big]
    elif nonk == 16:
        eff *= _NONKDIM_16[big]
    if launch.extra.get("kpack") == 2 and elem == 1:
        eff *= _KPACK_FP8
    wpe = launch.extra.get("waves_per_eu")
    if wpe:
        eff *= _WAVES_PER_EU[regs * wpe <= dev.regs_per_lane]
    return eff


def gemm_time_us(launch: Launch, shape: Shape, dev: DeviceSpec) -> LaunchTime:
    m, n, k = shape.mnk()
    bm = _const(launch, "BLOCK_M", "BLOCK_SIZE_M", "BM", default=64)
    bn = _const(launch, "BLOCK_N", "BLOCK_SIZE_N", "BN", default=64)
    bk = _const(launch, "BLOCK_K", "BLOCK_SIZE_K", "BK", default=64)
    split = max(1, _const(launch, "SPLIT_K", "SPLITK", default=1))
    group_m = _const(launch, "GROUP_M", "GROUP_SIZE_M", default=1)
    warps, stages = max(1, launch.num_warps), max(1, launch.num_stages)
    taken: set[str] = set()
    a, b = _operand(launch, m, k, taken), _operand(launch, n, k, taken)
    elem = a.element_size if a is not None else 1
    notes: list[str] = []

    regs, blocks = _occupancy(launch.kernel, dev, bm, bn, bk, warps, stages, elem)
    spill = regs > dev.regs_per_lane

    tm_count, tn_count = -(-m // bm), -(-n // bn)
    tiles = tm_count * tn_count
    units = tiles * split
    programs = max(1, launch.grid[0] * launch.grid[1] * launch.grid[2])
    persistent = "NUM_SMS" in launch.constexprs or programs < units
    slots = dev.units * blocks
    concurrent = min(units, slots, programs)
    rounds = -(-units // concurrent)
    resident = max(1, min(blocks, -(-concurrent // dev.units)))

    # Matrix-core efficiency.
    intensity = bm * bn / (bm + bn)
    eff = _CEILING * intensity / (intensity + _TILE_HALF) * bk / (bk + _K_STEP_HALF)
    simd_waves = resident * warps / 4
    eff *= min(1.0, simd_waves) * min(1.0, 0.6 + 0.2 * simd_waves)
    for name, t in (("a", a), ("b", b)):
        if not _k_contiguous(t, k):
            eff *= _TRANSPOSE.get(elem, 0.6)
            notes.append(f"{name} not K-contiguous")
    if spill:
        eff *= _SPILL
        notes.append(f"~{regs:.0f} registers per lane: spills")
    eff = _amd_options(eff, launch, dev, big=bm * bn / warps >= 64 * 64, elem=elem, regs=regs)

    if launch.upcast_fp32 or elem == 4:
        rate = dev.fp32_matrix_tflops
    elif launch.upcast_bf16 or elem == 2:
        rate = dev.bf16_tflops * (_UPCAST_BF16_RATE if launch.upcast_bf16 else 1.0)
    else:
        rate = dev.fp8_tflops
        if not dev.fp8_full_precision_acc and not launch.precise_acc:
            notes.append("fast fp8 accumulation: fails the task's tolerance on this device")
    if rate == dev.fp8_tflops and not dev.fp8_full_precision_acc and launch.precise_acc:
        # Promotion to fp32 after every wgmma makes each MMA wait for its result before the add,
        # serialising what is otherwise an asynchronous pipeline. Assumed 0.5x; the H200 anchors
        # (precise plain Triton ~2x slower than fast accumulation on large shapes) suggest so.
        eff *= _HOPPER_PRECISE
        notes.append("precise fp8 accumulation serialises wgmma")
    k_unit = -(-(-(-k // split)) // bk) * bk  # noqa: B002 (ceil divisions, not a decrement)
    unit_mma = 2 * bm * bn * k_unit * resident / (rate * 1e6 / dev.units * eff)
    alu_per_out = 3 * k_unit / 128  # scale and accumulate once per 128-wide scale block
    unit_alu = bm * bn * alu_per_out * resident / (dev.vector_fp32_tflops * 1e6 / dev.units * _VECTOR_EFF)
    t_compute = rounds * (unit_mma + _ALU_OVERLAP * unit_alu)

    # Memory: L2 traffic and traffic below L2.
    scale_bytes = (bm + -(-bn // 128)) * -(-k_unit // 128) * 4
    run_a = bk * elem if _k_contiguous(a, k) else bm * elem
    run_b = bk * elem if _k_contiguous(b, k) else bn * elem
    per_unit = (bm * max(1.0, _REQUEST_BYTES / run_a) + bn * max(1.0, _REQUEST_BYTES / run_b)) * k_unit * elem
    l2_bytes = units * (per_unit + scale_bytes)
    t_l2 = l2_bytes / (dev.l2_tbps * 1e6 * _L2_EFF)
    remap = "NUM_XCDS" in launch.constexprs and dev.l2_domains > 1
    miss = _below_l2_fraction(launch, dev, tm_count, tn_count, split, concurrent, bm, bn, group_m, remap)
    compulsory = (m + n) * k * elem
    below = max(compulsory, units * (bm + bn) * k_unit * elem * miss)
    if compulsory <= 0.5 * dev.l2_mb_per_domain * 2**20:
        below = compulsory  # operands fit in (each) L2: re-reads hit after the first touch
    t_hbm = compulsory / (dev.hbm_tbps * 1e6 * _HBM_EFF)
    extra = below - compulsory
    if extra > 0:
        bw = dev.llc_tbps * _LLC_EFF if dev.llc_mb * 2**20 >= compulsory else dev.hbm_tbps * _HBM_EFF
        t_hbm += extra / (bw * 1e6)
    t_mem = max(t_l2, t_hbm)
    overlap = _OVERLAP.get(stages, 0.9)
    body = max(t_compute, t_mem) + (1 - overlap) * min(t_compute, t_mem)

    if split > 1:
        partial = m * n * 4 * split
        body += (2 * partial / (dev.l2_tbps * 1e6 * _ATOMIC_L2_EFF)) if launch.atomic else partial / (dev.hbm_tbps * 1e6 * _HBM_EFF)
        notes.append(f"split-K {split}")
    else:
        body += 2 * m * n / (dev.hbm_tbps * 1e6 * _HBM_EFF)
    if persistent:
        prologue = _PROLOGUE_US + _PERSISTENT_PROLOGUE_US * (rounds - 1)
    else:
        prologue = _PROLOGUE_US * rounds
    total = body + prologue + dev.launch_us
    detail = (f"tiles {bm}x{bn}x{bk} w{warps} s{stages} units {units} rounds {rounds} x{resident}/CU "
              f"eff {eff:.2f} compute {t_compute:.1f}us mem {t_mem:.1f}us miss {miss:.2f}"
              + (f"; {', '.join(notes)}" if notes else ""))
    return LaunchTime(kernel=launch.kernel, kind="gemm", time_us=total, detail=detail)


def is_vector_gemm(launch: Launch, shape: Shape) -> bool:
    """A launch without ``tl.dot`` that still takes both operands and the output is doing the
    matrix product on the vector units (e.g. ``tl.sum`` of a broadcast product)."""
    if not shape.is_mnk():
        return False
    sizes = {math.prod(t.shape) for t in launch.tensors}
    m, n, k = shape.mnk()
    return {m * k, n * k, m * n} <= sizes


def launch_time_us(launch: Launch, shape: Shape, dev: DeviceSpec) -> LaunchTime:
    if launch.has_dot:
        if not shape.is_mnk():
            raise ModelUnsupported(f"kernel {launch.kernel} uses tl.dot, but the task's shape ({shape.label()}) is "
                                   "not a matrix product's m, n, k: the model cannot count its tiles")
        return gemm_time_us(launch, shape, dev)
    moved = sum(t.nbytes for t in launch.tensors)
    if is_vector_gemm(launch, shape):
        m, n, k = shape.mnk()
        t = 2 * m * n * k / (dev.vector_fp32_tflops * 1e6 * 0.5) + dev.launch_us
        return LaunchTime(kernel=launch.kernel, kind="vector-gemm", time_us=t + moved / (dev.hbm_tbps * 1e6 * _HBM_EFF),
                          detail="matrix product without tl.dot: vector fp32 rate")
    return memory_time_us(launch, moved, dev)


# The roofline for launches without matrix work (elementwise, reductions, stencils). Estimates:
_SATURATING_WARPS = 16  # resident warps per SM/CU that keep enough loads in flight for full bandwidth
_ROUND_US = 0.6  # one round of programs over the device: a program's load latency and start-up


def memory_time_us(launch: Launch, moved: int, dev: DeviceSpec) -> LaunchTime:
    """A memory-bound launch: its tensor arguments' bytes (each read or written once; a kernel
    that re-reads through the cache gets it for free, one that touches only part of a tensor
    pays for all of it) over HBM bandwidth, scaled down when too few warps are resident to
    saturate it, plus a latency per round of programs and the launch itself. Blocks too small
    pay in rounds, grids too small in bandwidth: what block-size and warp choices trade."""
    programs = max(1, launch.grid[0] * launch.grid[1] * launch.grid[2])
    warps = max(1, launch.num_warps)
    per_unit = max(1, min(dev.max_waves_per_unit // warps, 32))
    rounds = math.ceil(programs / (dev.units * per_unit))
    resident_warps = min(programs, dev.units * per_unit) * warps / dev.units
    share = min(1.0, resident_warps / _SATURATING_WARPS)
    t = moved / (dev.hbm_tbps * 1e6 * _HBM_EFF * share) + rounds * _ROUND_US + dev.launch_us
    return LaunchTime(kernel=launch.kernel, kind="memory", time_us=t,
                      detail=f"{moved} bytes, {programs} programs x {warps} warps, {rounds} rounds, "
                      f"bandwidth share {share:.2f}")


def torch_op_time_us(op: TorchOp, dev: DeviceSpec) -> LaunchTime:
    t = (op.bytes_read + op.bytes_written) / (dev.hbm_tbps * 1e6 * _HBM_EFF) + dev.launch_us
    if op.flops:
        # torch's fp32 matmul: matrix fp32 on MI300X (rocBLAS), plain fp32 FMA on Hopper (TF32 is
        # off by default for matmul); other dtypes at the bf16 rate. 0.7 of peak, as vendor BLAS.
        if op.dtype == "float32":
            rate = dev.fp32_matrix_tflops if dev.fp8_full_precision_acc else dev.vector_fp32_tflops
        else:
            rate = dev.bf16_tflops
        t += op.flops / (rate * 1e6 * 0.7)
    return LaunchTime(kernel=op.op, kind="torch", time_us=t)


def launches_time_us(launches: list[Launch], shape: Shape, dev: DeviceSpec) -> float:
    """Total time of a list of launches (used to pick autotune configs); infeasible ones: inf."""
    try:
        return sum(launch_time_us(x, shape, dev).time_us for x in launches)
    except (ModelInfeasible, ModelUnsupported):
        return math.inf


def capture_time_us(capture: Capture, dev: DeviceSpec) -> tuple[float, list[LaunchTime]]:
    """One shape's modelled time: every launch and every recorded torch op, in sequence.
    Raises ModelInfeasible when a launch could not run on the device, ModelUnsupported when the
    model cannot time it."""
    parts = [launch_time_us(x, capture.shape, dev) for x in capture.launches]
    parts += [torch_op_time_us(op, dev) for op in capture.torch_ops]
    return sum(p.time_us for p in parts), parts
