"""Device specs for the analytic model, and the speed of light of one GEMM shape.

Figures are public vendor numbers (docs/task-facts.md) unless noted; the efficiency constants
that turn peaks into achievable rates live in ``_timing`` with their reasons.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from kernel_scientist.blackboard.records import Shape


class DeviceSpec(msgspec.Struct, frozen=True):
    name: str
    label: str  # what a report prints
    units: int  # CUs (AMD) or SMs (NVIDIA)
    lanes: int  # wavefront / warp width
    fp8_tflops: float  # dense peak
    bf16_tflops: float
    fp32_matrix_tflops: float  # MI300X matrix fp32; Hopper tf32 (Triton's fp32 dot default)
    vector_fp32_tflops: float  # plain FMA units: where block scales and fp32 promotion run
    hbm_tbps: float
    l2_mb_per_domain: float  # MI300X: per XCD; Hopper: the whole L2
    l2_domains: int  # XCDs on MI300X (workgroups go round-robin over them); 1 on Hopper
    l2_tbps: float  # aggregate L2 bandwidth (estimate, see _timing)
    llc_mb: float  # MI300X Infinity Cache; 0 when none
    llc_tbps: float
    smem_kb: int  # LDS / shared memory per CU/SM usable by one block
    regs_per_lane: int  # VGPRs per lane before spilling (MI300X: 512 with AGPRs); Hopper: 255
    reg_file_kb: int  # per CU / SM
    max_waves_per_unit: int  # resident wavefronts/warps per CU/SM
    launch_us: float  # per kernel launch, host-to-completion floor
    fp8_full_precision_acc: bool  # MI300X accumulates fp8 MFMA in fp32; Hopper wgmma does not
    vendor: Literal["amd", "nvidia"] = "nvidia"  # whose techniques apply (knowledge's catalogue per vendor)
    # The architecture Triton compiles for: what the simulated backend's compile statistics are of.
    arch: str = "sm_90"


_H200 = DeviceSpec(
    name="h200",
    label="NVIDIA H200 SXM",
    units=132,
    lanes=32,
    fp8_tflops=1979.0,
    bf16_tflops=989.0,
    fp32_matrix_tflops=494.7,
    vector_fp32_tflops=67.0,
    hbm_tbps=4.8,
    l2_mb_per_domain=60.0,
    l2_domains=1,
    l2_tbps=12.0,
    llc_mb=0.0,
    llc_tbps=0.0,
    smem_kb=227,
    regs_per_lane=255,
    reg_file_kb=256,
    max_waves_per_unit=64,
    launch_us=3.0,
    fp8_full_precision_acc=False,
)

DEVICES: dict[str, DeviceSpec] = {
    "mi300x": DeviceSpec(
        name="mi300x",
        label="AMD Instinct MI300X",
        units=304,  # 8 XCDs x 38 CUs
        lanes=64,
        fp8_tflops=2614.9,
        bf16_tflops=1307.4,
        fp32_matrix_tflops=163.4,
        vector_fp32_tflops=163.4,
        hbm_tbps=5.3,
        l2_mb_per_domain=4.0,
        l2_domains=8,
        l2_tbps=8 * 2.1 * 2048 / 1000,
        llc_mb=256.0,
        llc_tbps=17.0,
        smem_kb=64,
        regs_per_lane=512,  # counting the accumulation registers (AGPRs)
        reg_file_kb=512,
        max_waves_per_unit=32,
        launch_us=4.0,
        fp8_full_precision_acc=True,
        vendor="amd",
        arch="gfx942",
    ),
    "h200": _H200,
    # The same Hopper chip with less and slower HBM and a smaller L2.
    "h100": msgspec.structs.replace(_H200, name="h100", label="NVIDIA H100 SXM", hbm_tbps=3.35, l2_mb_per_domain=50.0),
}


def spec_for(device_name: str) -> DeviceSpec:
    """The spec of a GPU by the name its driver reports ("NVIDIA H200", "AMD Instinct MI300X"):
    the one place a device name is read. An AMD GPU is modelled as the MI300X (the only AMD spec),
    an unknown NVIDIA one as the H100."""
    lowered = device_name.lower()
    for key, markers in (("h200", ("h200",)), ("h100", ("h100",)), ("mi300x", ("amd", "instinct", "mi3"))):
        if any(marker in lowered for marker in markers):
            return DEVICES[key]
    return DEVICES["h100"]


def min_bytes(shape: Shape) -> int:
    """Compulsory traffic of the task: read fp8 a and b once, write bf16 c (the task's 2mn)."""
    m, n, k = shape.mnk()
    return m * k + n * k + 2 * m * n


def l2_flush_bytes(device: DeviceSpec) -> int:
    """Bytes to write between timed calls so that nothing of the last call stays cached: twice
    the largest cache level (all of MI300X's L2s, or its Infinity Cache; Hopper's L2)."""
    return int(2 * 2**20 * max(device.l2_mb_per_domain * device.l2_domains, device.llc_mb))


def speed_of_light_us(shape: Shape, device: DeviceSpec | str) -> float:
    """max(2mnk / fp8 peak, compulsory bytes / HBM bandwidth), as the task's own table does."""
    dev = DEVICES[device] if isinstance(device, str) else device
    m, n, k = shape.mnk()
    flops = 2 * m * n * k
    return max(flops / (dev.fp8_tflops * 1e6), min_bytes(shape) / (dev.hbm_tbps * 1e6))
