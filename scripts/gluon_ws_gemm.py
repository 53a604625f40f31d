"""The block-scaled GEMM in Gluon with explicit warp specialisation: one loader warp feeds a ring of
shared-memory stages by TMA, and two consumer warpgroups share each 128-row tile (64 rows each),
taking turns at the tensor cores so that one promotes its product while the other multiplies.

Why (docs/h200.md): each 128-deep scale block's product must be finished before its scaled add, so
a warpgroup that multiplies and promotes alone leaves the tensor cores idle during every promotion;
``tl.dot`` in Triton 3.6 and the single-partition Gluon kernel (``gluon_gemm.py``, which ptxas
serialises: C7514) both hold the main loop near half the 16-bit rate. Here each consumer waits for
its own product at depth 0 (nothing for ptxas to serialise), and a pair of turn barriers orders the
two consumers' wgmma issues (CUTLASS's ping-pong order barrier at scale-block granularity), so the
tensor cores run consumer 0's block k, consumer 1's block k, consumer 0's block k+1, ... while the
other one adds.

Operands are the pre-pass's fp16 copies (exact for e4m3) in the task's column-major layout, read
as [k, m] and [k, n] row-major arrays. Used by ``scripts/explore_hopper.py`` (variant token
``glw``; ``glw_ns`` without the turns). ``--ptxas`` compiles it for sm_90a on any machine:

    python scripts/gluon_ws_gemm.py --ptxas     # registers, spills, wgmma serialisation (C7514)
"""

from __future__ import annotations

import argparse
import inspect

import torch
import triton
from gluon_gemm import _tile_of, compile_verdict  # the same grouped persistent order
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# gl.warp_specialize changed its signature between Triton 3.6 (default args and partition, then the
# workers' shared args and partitions) and 3.8 (one list of (partition, args)).
LIST_API = next(iter(inspect.signature(gl.warp_specialize).parameters)) == "functions_and_args"
ROWS = 64  # rows of a tile per consumer warpgroup (one m64 wgmma)
HALF = gl.constexpr(ROWS)


@gluon.jit
def _loader(args):
    """One warp: for every step, wait until both consumers released the stage, then copy the
    step's two a halves and its b tile into it."""
    (a_desc, b_desc, a0_bufs, a1_bufs, b_bufs, ready, empty, turns, as_ptr, bs_ptr, c_ptr) = args[:11]
    (M, N, KB, NBLK_N, sam, sak, sbn, sbk, GROUP_M, NUM_PROGS, STAGGER) = args[11:]
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    pid = gl.program_id(0)
    num_pid_m = gl.cdiv(M, 2 * HALF)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    total = gl.cdiv(num_pid_m * num_pid_n - pid, NUM_PROGS) * KB
    nbytes: gl.constexpr = 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    for step in range(total):
        s = step % STAGES
        mbarrier.wait(empty.index(s), ((step // STAGES) & 1) ^ 1)
        pid_m, pid_n, kb = _tile_of(step, pid, KB, NUM_PROGS, num_pid_m, num_pid_n, GROUP_M)
        bar = ready.index(s)
        mbarrier.expect(bar, nbytes)
        tma.async_copy_global_to_shared(a_desc, [kb * 128, pid_m * 2 * HALF], bar, a0_bufs.index(s))
        tma.async_copy_global_to_shared(a_desc, [kb * 128, pid_m * 2 * HALF + HALF], bar, a1_bufs.index(s))
        tma.async_copy_global_to_shared(b_desc, [kb * 128, pid_n * BLOCK_N], bar, b_bufs.index(s))


@gluon.jit
def _consume(args, WHICH: gl.constexpr):
    """One warpgroup, rows [WHICH * 64, WHICH * 64 + 64) of every tile: per scale block a wgmma into
    a fresh register tile, waited for at depth 0, then added in fp32 times a_scale x b_scale."""
    (a_desc, b_desc, a0_bufs, a1_bufs, b_bufs, ready, empty, turns, as_ptr, bs_ptr, c_ptr) = args[:11]
    (M, N, KB, NBLK_N, sam, sak, sbn, sbk, GROUP_M, NUM_PROGS, STAGGER) = args[11:]
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = a1_bufs if WHICH == 1 else a0_bufs
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    rows: gl.constexpr = gl.SliceLayout(1, mma)
    cols: gl.constexpr = gl.SliceLayout(0, mma)
    pid = gl.program_id(0)
    num_pid_m = gl.cdiv(M, 2 * HALF)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    total = gl.cdiv(num_pid_m * num_pid_n - pid, NUM_PROGS) * KB
    zero = gl.zeros((HALF, BLOCK_N), gl.float32, layout=mma)
    acc = gl.zeros((HALF, BLOCK_N), gl.float32, layout=mma)
    for step in range(total):
        s = step % STAGES
        pid_m, pid_n, kb = _tile_of(step, pid, KB, NUM_PROGS, num_pid_m, num_pid_n, GROUP_M)
        # The scales first: their loads are in flight while this warpgroup waits for tiles and turn.
        offs_m = pid_m * 2 * HALF + WHICH * HALF + gl.arange(0, HALF, layout=rows)
        a_s = gl.load(as_ptr + offs_m * sam + kb * sak, mask=offs_m < M, other=0.0)
        scale = a_s * gl.load(bs_ptr + ((pid_n * BLOCK_N) // 128) * sbn + kb * sbk)
        mbarrier.wait(ready.index(s), (step // STAGES) & 1)
        if STAGGER:
            # consumer 0 goes first (a fresh barrier passes a wait on parity 1); each hands the turn on
            mbarrier.wait(turns.index(WHICH), (step & 1) ^ (1 - WHICH))
        tok = warpgroup_mma(a_bufs.index(s).permute((1, 0)), b_bufs.index(s), zero, use_acc=False, is_async=True)
        if STAGGER:
            mbarrier.arrive(turns.index(1 - WHICH), count=1)
        prod, _, _ = warpgroup_mma_wait(0, deps=[tok, a_bufs.index(s), b_bufs.index(s)])
        mbarrier.arrive(empty.index(s), count=1)
        acc = acc + prod * scale[:, None]
        if kb == KB - 1:
            offs_n = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=cols)
            mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
            gl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(gl.bfloat16), mask=mask)
            acc = zero


@gluon.jit
def _consume0(args):
    _consume(args, 0)


@gluon.jit
def _consume1(args):
    _consume(args, 1)


@gluon.jit
def ws_blockscaled_kernel(
    a_desc,
    b_desc,
    as_ptr,
    bs_ptr,
    c_ptr,
    M,
    N,
    K,
    NBLK_N,
    sam,
    sak,
    sbn,
    sbk,
    GROUP_M: gl.constexpr,
    NUM_PROGS: gl.constexpr,
    STAGES: gl.constexpr,
    STAGGER: gl.constexpr,
    LIST: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
    num_warps: gl.constexpr,
):
    gl.static_assert(a_desc.block_type.shape[0] == 128, "one step is one 128-deep scale block")
    gl.static_assert(a_desc.block_type.shape[1] == HALF, "a is copied in two 64-row halves")
    gl.static_assert(b_desc.block_type.shape[1] <= 128, "a tile's columns share one b scale")
    gl.static_assert(num_warps == 4, "the default partition is consumer 0, one warpgroup")
    a0_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    a1_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # both consumers release a stage
    for i in gl.static_range(2):
        mbarrier.init(turns.index(i), count=1)
    KB = gl.cdiv(K, 128)
    args = (a_desc, b_desc, a0_bufs, a1_bufs, b_bufs, ready, empty, turns, as_ptr, bs_ptr, c_ptr)
    args = args + (M, N, KB, NBLK_N, sam, sak, sbn, sbk, GROUP_M, NUM_PROGS, STAGGER)
    if LIST:
        gl.warp_specialize(
            [(_consume0, (args,)), (_consume1, (args,)), (_loader, (args,))], [4, 1], [CONSUMER_REGS, 40]
        )
    else:
        gl.warp_specialize((args,), _consume0, (args,), [_consume1, _loader], [4, 1], [CONSUMER_REGS, 40])


def _descriptors(a16, b16, block_n: int):
    """TMA descriptors over the fp16 copies of a [m, k] and b [n, k], both column-major as given:
    a as a [k, m] row-major array in 64-row halves, b as [k, n] in BLOCK_N-wide tiles."""
    m, k = a16.shape
    n = b16.shape[0]
    a_layout = gl.NVMMASharedLayout.get_default_for([128, ROWS], gl.float16)
    b_layout = gl.NVMMASharedLayout.get_default_for([128, block_n], gl.float16)
    ad = TensorDescriptor(a16.T, [k, m], [m, 1], [128, ROWS], a_layout)
    bd = TensorDescriptor(b16.T, [k, n], [n, 1], [128, block_n], b_layout)
    return ad, bd


def make_ws_gluon(cfg, convert, stagger: bool = True, regs: int = 232):
    """A callable for the explore script (``cfg`` = (BLOCK_M, BLOCK_N, warps, stages); BLOCK_M must be
    128 and warps 8: two consumer warpgroups). ``convert`` is its fp8 -> fp16 pre-pass kernel."""
    bm, bn, warps, stages = cfg
    if bm != 128 or warps != 8 or bn > 128:
        raise ValueError("glw: 128-row tiles (two 64-row consumers), 8 warps, BLOCK_N <= 128")
    n_sms = torch.cuda.get_device_properties(0).multi_processor_count
    cache = {}

    def fn(data):
        a, b, a_s, b_s, c = data
        m, k = a.shape
        n = b.shape[0]
        if a.stride(0) != 1 or b.stride(0) != 1:
            raise ValueError("glw reads column-major a and b (the task's layout)")
        key = (m, n, k)
        if key not in cache:
            a16 = torch.empty_like(a, dtype=torch.float16)
            b16 = torch.empty_like(b, dtype=torch.float16)
            ad, bd = _descriptors(a16, b16, bn)
            progs = min(triton.cdiv(m, bm) * triton.cdiv(n, bn), n_sms)
            grid = (triton.cdiv(a.numel(), 4096) + triton.cdiv(b.numel(), 4096),)
            cache[key] = (a16, b16, ad, bd, progs, grid)
        a16, b16, ad, bd, progs, grid = cache[key]
        convert[grid](a, b, a16, b16, a.numel(), b.numel(), BLOCK=4096)
        ws_blockscaled_kernel[(progs,)](
            ad,
            bd,
            a_s,
            b_s,
            c,
            m,
            n,
            k,
            b_s.shape[0],
            a_s.stride(0),
            a_s.stride(1),
            b_s.stride(0),
            b_s.stride(1),
            GROUP_M=8,
            NUM_PROGS=progs,
            STAGES=stages,
            STAGGER=stagger,
            LIST=LIST_API,
            CONSUMER_REGS=regs,
            num_warps=4,
        )
        return c

    return fn


def ptxas_report(block_n: int = 128, stages: int = 3, stagger: bool = True, regs: int = 232) -> str:
    """Compile the kernel for sm_90a on this machine (no GPU needed) and return what Triton's own
    ptxas says of it: registers, spills, and any wgmma serialisation warning."""
    a_layout = gl.NVMMASharedLayout.get_default_for([128, ROWS], gl.float16)
    b_layout = gl.NVMMASharedLayout.get_default_for([128, block_n], gl.float16)
    fn = ws_blockscaled_kernel
    consts = dict(
        GROUP_M=8, NUM_PROGS=132, STAGES=stages, STAGGER=stagger, LIST=LIST_API, CONSUMER_REGS=regs, num_warps=4
    )
    signature = {
        "a_desc": f"tensordesc<fp16[128, {ROWS}],{a_layout!r}>",
        "b_desc": f"tensordesc<fp16[128, {block_n}],{b_layout!r}>",
        "as_ptr": "*fp32",
        "bs_ptr": "*fp32",
        "c_ptr": "*bf16",
    }
    signature.update({name: "i32" for name in ("M", "N", "K", "NBLK_N", "sam", "sak", "sbn", "sbk")})
    signature.update({name: "constexpr" for name in consts})
    return compile_verdict(fn, signature, consts, 4)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ptxas", action="store_true", help="compile for sm_90a and print ptxas -v's verdict")
    parser.add_argument("--no-stagger", action="store_true", help="without the turn barriers")
    parser.add_argument("--regs", type=int, default=232, help="registers per consumer thread (setmaxnreg)")
    opts = parser.parse_args()
    if opts.ptxas:
        print(f"triton {triton.__version__}\n{ptxas_report(stagger=not opts.no_stagger, regs=opts.regs)}")
