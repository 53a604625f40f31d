"""The block-scaled GEMM written in Gluon (Triton's explicit-layout dialect) for Hopper, so that each
scale block's scaled add overlaps the next block's tensor-core work, which ``tl.dot`` in Triton 3.6
does not allow (docs/h200.md, fourth session: the main loop held at 40-55% of the 16-bit rate).

Per program, a persistent loop over output tiles, flattened over (tile, scale block) steps:

    issue the wgmma of step g into a fresh accumulator (asynchronous)
    wait until only that one is outstanding      -> step g-1's product is ready
    acc += product(g-1) * a_scale * b_scale        (CUDA cores, while the tensor cores run step g)
    refill step g-1's shared-memory stage with step g-1+STAGES's tiles (TMA)

Operands are the fp16 copies of the pre-pass (exact for e4m3), read in the task's column-major
layout: wgmma reads either layout of a 16-bit operand from shared memory. Used by
``scripts/explore_hopper.py`` (variant token ``glu``); needs a Hopper GPU to run.

Measured (docs/h200.md, fifth session): correct on the 18 ranked shapes, but 178.9 us do_bench
against 143.0 us for the Triton warp-specialised kernel in the same run, and no faster than
waiting for both products (``glu_w0``). ptxas says why (C7514): it serialises the wgmmas because
it cannot prove that the scaled add reads only a retired product when one is still in flight
across the loop's back edge. ``--ptxas`` shows that verdict on any machine, without a GPU:

    python scripts/gluon_gemm.py --ptxas     # compile for sm_90a, ptxas -v: registers, spills, C7514
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor


@gluon.jit
def _tile_of(step, pid, KB, NUM_PROGS: gl.constexpr, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """(pid_m, pid_n, kb) of flat step ``step`` of this program: tiles pid, pid + NUM_PROGS, ...
    in grouped order, KB scale blocks each."""
    tile = pid + (step // KB) * NUM_PROGS
    kb = step % KB
    group = GROUP_M * num_pid_n
    first_m = (tile // group) * GROUP_M
    size_m = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % group) % size_m
    pid_n = (tile % group) // size_m
    return pid_m, pid_n, kb


@gluon.jit
def _load(
    step,
    total,
    pid,
    KB,
    NUM_PROGS: gl.constexpr,
    num_pid_m,
    num_pid_n,
    GROUP_M: gl.constexpr,
    a_desc,
    b_desc,
    bars,
    a_bufs,
    b_bufs,
    STAGES: gl.constexpr,
):
    pid_m, pid_n, kb = _tile_of(step, pid, KB, NUM_PROGS, num_pid_m, num_pid_n, GROUP_M)
    s = step % STAGES
    live = step < total
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    mbarrier.expect(bars.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=live)
    tma.async_copy_global_to_shared(a_desc, [kb * BLOCK_K, pid_m * BLOCK_M], bars.index(s), a_bufs.index(s), live)
    tma.async_copy_global_to_shared(b_desc, [kb * BLOCK_K, pid_n * BLOCK_N], bars.index(s), b_bufs.index(s), live)


@gluon.jit
def _scale(
    as_ptr, bs_ptr, pid_m, pid_n, kb, M, NBLK_N, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, rows: gl.constexpr
):
    """a_scale x b_scale of one tile's rows for scale block kb (the tile's columns share one b scale)."""
    offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=rows)
    a_s = gl.load(as_ptr + kb * M + offs_m, mask=offs_m < M, other=0.0)
    return a_s * gl.load(bs_ptr + kb * NBLK_N + (pid_n * BLOCK_N) // 128)


@gluon.jit
def _store(
    c_ptr, acc, pid_m, pid_n, M, N, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, rows: gl.constexpr, cols: gl.constexpr
):
    offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=rows)
    offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=cols)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    gl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(gl.bfloat16), mask=mask)


@gluon.jit
def _issue(step, a_bufs, b_bufs, bars, zero, valid, STAGES: gl.constexpr):
    """Wait for step's tiles and start its wgmma into a fresh accumulator (asynchronous)."""
    s = step % STAGES
    mbarrier.wait(bars.index(s), (step // STAGES) & 1, pred=valid)
    return warpgroup_mma(a_bufs.index(s).permute((1, 0)), b_bufs.index(s), zero, use_acc=False, is_async=True)


@gluon.jit
def _retire(
    acc,
    done,
    scale,
    last,
    valid,
    c_ptr,
    pid_m,
    pid_n,
    M,
    N,
    zero,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    rows: gl.constexpr,
    cols: gl.constexpr,
):
    """Add a finished product, scaled, to the tile; at the tile's last scale block write it."""
    if valid:
        acc = acc + done * scale[:, None]
        if last:
            _store(c_ptr, acc, pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, rows, cols)
            acc = zero
    return acc


@gluon.jit
def blockscaled_kernel(
    a_desc,
    b_desc,
    as_ptr,
    bs_ptr,
    c_ptr,
    M,
    N,
    K,
    NBLK_N,
    GROUP_M: gl.constexpr,
    NUM_PROGS: gl.constexpr,
    STAGES: gl.constexpr,
    OUTSTANDING: gl.constexpr,
    num_warps: gl.constexpr,
):
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    gl.static_assert(BLOCK_K == 128, "one step is one 128-wide scale block")
    gl.static_assert(BLOCK_N <= 128, "a tile's columns share one b scale")

    # wgmma layout: warpgroups stacked along M, the widest instruction N that fits.
    WARPS_M: gl.constexpr = num_warps if BLOCK_M >= 16 * num_warps else BLOCK_M // 16
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0],
        warps_per_cta=[WARPS_M, num_warps // WARPS_M],
        instr_shape=[16, BLOCK_N // (num_warps // WARPS_M), 16],
    )
    rows: gl.constexpr = gl.SliceLayout(1, mma_layout)
    cols: gl.constexpr = gl.SliceLayout(0, mma_layout)

    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)

    pid = gl.program_id(0)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    KB = gl.cdiv(K, BLOCK_K)
    my_tiles = gl.cdiv(num_pid_m * num_pid_n - pid, NUM_PROGS)
    total = my_tiles * KB

    # Every stage filled before the first wgmma: stage s is refilled only once step s has retired.
    for i in gl.static_range(STAGES):
        _load(i, total, pid, KB, NUM_PROGS, num_pid_m, num_pid_n, GROUP_M, a_desc, b_desc, bars, a_bufs, b_bufs, STAGES)

    zero = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, layout=mma_layout)
    acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, layout=mma_layout)
    # Two products in flight, in two fixed register sets (pa, pb): the loop is unrolled by two so
    # that no product is copied while its wgmma runs (ptxas would serialise every wgmma).
    # Step 0 is peeled; a step past the end (odd totals) runs on stale tiles and is dropped.
    pa = _issue(0, a_bufs, b_bufs, bars, zero, True, STAGES)
    ma, na, ka = _tile_of(0, pid, KB, NUM_PROGS, num_pid_m, num_pid_n, GROUP_M)
    sa = _scale(as_ptr, bs_ptr, ma, na, ka, M, NBLK_N, BLOCK_M, BLOCK_N, rows)
    # fmt: off
    for g in range(1, total, 2):
        pb = _issue(g, a_bufs, b_bufs, bars, zero, True, STAGES)
        done = warpgroup_mma_wait(OUTSTANDING, (pa,))
        acc = _retire(acc, done, sa, ka == KB - 1, True, c_ptr, ma, na, M, N, zero, BLOCK_M, BLOCK_N, rows, cols)
        _load(g - 1 + STAGES, total, pid, KB, NUM_PROGS, num_pid_m, num_pid_n, GROUP_M, a_desc, b_desc, bars, a_bufs, b_bufs, STAGES)
        mb, nb, kbb = _tile_of(g, pid, KB, NUM_PROGS, num_pid_m, num_pid_n, GROUP_M)
        sb = _scale(as_ptr, bs_ptr, mb, nb, kbb, M, NBLK_N, BLOCK_M, BLOCK_N, rows)

        pa = _issue(g + 1, a_bufs, b_bufs, bars, zero, g + 1 < total, STAGES)
        done = warpgroup_mma_wait(OUTSTANDING, (pb,))
        acc = _retire(acc, done, sb, kbb == KB - 1, True, c_ptr, mb, nb, M, N, zero, BLOCK_M, BLOCK_N, rows, cols)
        _load(g + STAGES, total, pid, KB, NUM_PROGS, num_pid_m, num_pid_n, GROUP_M, a_desc, b_desc, bars, a_bufs, b_bufs, STAGES)
        ma, na, ka = _tile_of(g + 1, pid, KB, NUM_PROGS, num_pid_m, num_pid_n, GROUP_M)
        sa = _scale(as_ptr, bs_ptr, ma, na, ka, M, NBLK_N, BLOCK_M, BLOCK_N, rows)
    # fmt: on
    done = warpgroup_mma_wait(0, (pa,))
    acc = _retire(acc, done, sa, ka == KB - 1, total % 2 == 1, c_ptr, ma, na, M, N, zero, BLOCK_M, BLOCK_N, rows, cols)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(i))


def make_gluon(cfg, convert, outstanding=1, per_sm=1):
    """A callable for the explore script: ``convert`` is its fp8 -> fp16 pre-pass kernel; the
    descriptors over the per-shape fp16 copies are built once per shape. ``outstanding`` 1 overlaps
    each scaled add with the next block's wgmma, 0 waits for both (the tl.dot schedule);
    ``per_sm`` persistent programs per SM."""
    bm, bn, warps, stages = cfg
    n_sms = torch.cuda.get_device_properties(0).multi_processor_count
    cache = {}

    def fn(data):
        a, b, a_s, b_s, c = data
        m, k = a.shape
        n = b.shape[0]
        key = (m, n, k)
        if key not in cache:
            a16 = torch.empty_like(a, dtype=torch.float16)
            b16 = torch.empty_like(b, dtype=torch.float16)
            a_layout = gl.NVMMASharedLayout.get_default_for([128, bm], gl.float16)
            b_layout = gl.NVMMASharedLayout.get_default_for([128, bn], gl.float16)
            # a is [m, k] column-major: a [k, m] row-major array for the descriptor; b likewise.
            ad = TensorDescriptor(a16.T, [k, m], [m, 1], [128, bm], a_layout)
            bd = TensorDescriptor(b16.T, [k, n], [n, 1], [128, bn], b_layout)
            progs = min(triton.cdiv(m, bm) * triton.cdiv(n, bn), per_sm * n_sms)
            grid = (triton.cdiv(a.numel(), 4096) + triton.cdiv(b.numel(), 4096),)
            cache[key] = (a16, b16, ad, bd, progs, grid)
        a16, b16, ad, bd, progs, grid = cache[key]
        convert[grid](a, b, a16, b16, a.numel(), b.numel(), BLOCK=4096)
        blockscaled_kernel[(progs,)](
            ad,
            bd,
            a_s,
            b_s,
            c,
            m,
            n,
            k,
            b_s.shape[0],
            GROUP_M=8,
            NUM_PROGS=progs,
            STAGES=stages,
            OUTSTANDING=outstanding,
            num_warps=warps,
        )
        return c

    return fn


def ptxas_report(block_m: int = 128, block_n: int = 128, warps: int = 8, stages: int = 3) -> str:
    """Compile the kernel for sm_90a on this machine (no GPU needed) and return what Triton's own
    ptxas says of it: registers, spills, and any wgmma serialisation warning."""
    a_layout = gl.NVMMASharedLayout.get_default_for([128, block_m], gl.float16)
    b_layout = gl.NVMMASharedLayout.get_default_for([128, block_n], gl.float16)
    fn = blockscaled_kernel
    consts = dict(GROUP_M=8, NUM_PROGS=132, STAGES=stages, OUTSTANDING=1, num_warps=warps)
    signature = {
        "a_desc": f"tensordesc<fp16[128, {block_m}],{a_layout!r}>",
        "b_desc": f"tensordesc<fp16[128, {block_n}],{b_layout!r}>",
        "as_ptr": "*fp32",
        "bs_ptr": "*fp32",
        "c_ptr": "*bf16",
        "M": "i32",
        "N": "i32",
        "K": "i32",
        "NBLK_N": "i32",
    }
    signature.update({name: "constexpr" for name in consts})
    return compile_verdict(fn, signature, consts, warps)


def compile_verdict(fn, signature: dict, consts: dict, warps: int) -> str:
    """Compile Gluon kernel ``fn`` for sm_90a and return ptxas -v's lines on it (registers, spills,
    C75xx warnings) after the PTX's wgmma wait depths and register reallocations."""
    from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    from triton.experimental.gluon._runtime import GluonASTSource  # noqa: PLC0415

    src = GluonASTSource(fn, signature, {(fn.arg_names.index(n),): v for n, v in consts.items()})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    ptx = compiled.asm["ptx"]
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.ptx"
        path.write_text(ptx)
        run = subprocess.run(
            [str(ptxas), "-arch=sm_90a", "-v", str(path), "-o", str(path.with_suffix(".cubin"))],
            capture_output=True,
            text=True,
            check=False,
        )
    waits = re.findall(r"wgmma.wait_group.sync.aligned (\d+)", ptx)
    setmax = re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32\s+(\d+)", ptx)
    lines = [ln.strip() for ln in (run.stdout + run.stderr).splitlines() if re.search("Used|spill|C75|rror", ln)]
    return f"wgmma.wait_group depths: {waits}; setmaxnreg: {setmax}\n" + "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ptxas", action="store_true", help="compile for sm_90a and print ptxas -v's verdict")
    if parser.parse_args().ptxas:
        print(f"triton {triton.__version__}\n{ptxas_report()}")
