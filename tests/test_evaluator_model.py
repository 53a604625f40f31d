"""The analytic model: speed of light, monotone in the obvious directions, never below light."""

from __future__ import annotations

import itertools

import pytest

from blackboard.records import Shape
from evaluator import DEVICES, Launch, TensorArg, speed_of_light_us
from evaluator._model import ModelInfeasible, capture_time_us, launch_time_us
from evaluator._wire import Capture

BENCH = [Shape(1024, 1536, 7168), Shape(1024, 576, 7168), Shape(1024, 7168, 256), Shape(6144, 4608, 7168),
         Shape(6144, 7168, 256), Shape(6144, 512, 7168), Shape(6144, 4096, 512)]


def gemm(shape: Shape, bm=64, bn=64, bk=128, warps=4, stages=2, kcontig=False, precise=True, grid=None,
         **consts) -> Launch:
    m, n, k = shape.m, shape.n, shape.k
    a_stride = [k, 1] if kcontig else [1, m]
    b_stride = [k, 1] if kcontig else [1, n]
    tiles = -(-m // bm) * -(-n // bn) * consts.get("SPLIT_K", 1)
    return Launch(
        kernel="gemm", grid=[grid or tiles, 1, 1], num_warps=warps, num_stages=stages,
        constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, **consts}, extra={},
        tensors=[TensorArg("a", [m, k], a_stride, "float8_e4m3fnuz", 1),
                 TensorArg("b", [n, k], b_stride, "float8_e4m3fnuz", 1),
                 TensorArg("c", [m, n], [n, 1], "bfloat16", 2)],
        has_dot=True, precise_acc=precise, upcast_bf16=False, upcast_fp32=False, atomic="SPLIT_K" in consts)


def t(launch: Launch, shape: Shape, device="mi300x") -> float:
    return launch_time_us(launch, shape, DEVICES[device]).time_us


def test_speed_of_light_matches_the_tasks_table():
    table = {(1024, 1536, 7168): 8.63, (1024, 4608, 7168): 25.89, (6144, 1536, 7168): 51.78,
             (6144, 4608, 7168): 155.30, (1024, 7168, 256): 3.17, (6144, 7168, 256): 17.27}
    for (m, n, k), us in table.items():
        assert speed_of_light_us(Shape(m, n, k), "mi300x") == pytest.approx(us, rel=2e-3)  # the table rounds its peak


def test_bigger_tiles_and_k_contiguous_operands_are_faster():
    for s in BENCH:
        assert t(gemm(s, kcontig=True), s) < t(gemm(s), s)
        if (s.m // 128) * (s.n // 128) >= 304:  # enough big tiles to fill every CU
            assert t(gemm(s, bm=128, bn=128, warps=8, kcontig=True), s) < t(gemm(s, kcontig=True), s)
    s = Shape(1024, 1536, 7168)  # 96 big tiles leave 208 CUs idle; 384 small ones fill them
    assert t(gemm(s, bm=128, bn=128, warps=8, kcontig=True), s) > t(gemm(s, kcontig=True), s)


def test_grouping_and_xcd_remap_cut_traffic_below_l2():
    s = Shape(6144, 4608, 7168)
    plain = launch_time_us(gemm(s, bm=128, bn=128, warps=8, kcontig=True), s, DEVICES["mi300x"]).detail
    grouped = launch_time_us(gemm(s, bm=128, bn=128, warps=8, kcontig=True, GROUP_M=8, NUM_XCDS=8), s,
                             DEVICES["mi300x"]).detail
    miss = lambda d: float(d.split("miss ")[1].split(";")[0])  # noqa: E731
    assert miss(grouped) < miss(plain)


def test_split_k_helps_when_tiles_cannot_fill_the_machine():
    s = Shape(1024, 512, 7168)  # 32 tiles of 128x128 for 304 CUs
    base = t(gemm(s, bm=128, bn=128, warps=8, kcontig=True), s)
    assert t(gemm(s, bm=128, bn=128, warps=8, kcontig=True, SPLIT_K=8), s) < 0.5 * base


def test_precise_accumulation_costs_on_hopper_only():
    s = Shape(6144, 4608, 7168)
    fast, precise = gemm(s, kcontig=True, precise=False), gemm(s, kcontig=True, precise=True)
    assert t(precise, s, "mi300x") == pytest.approx(t(fast, s, "mi300x"))
    assert t(precise, s, "h200") > 1.2 * t(fast, s, "h200")


def test_too_much_lds_cannot_compile():
    s = Shape(1024, 1536, 7168)
    with pytest.raises(ModelInfeasible, match="shared memory"):
        launch_time_us(gemm(s, bm=256, bn=256, stages=2), s, DEVICES["mi300x"])


def test_no_configuration_beats_the_speed_of_light():
    for device, s in itertools.product(("mi300x", "h200"), BENCH):
        sol = speed_of_light_us(s, device)
        for bm, bn, bk, warps, stages, kc, extra in itertools.product(
                (16, 128, 256), (16, 128, 256), (32, 256), (1, 8), (1, 4), (False, True),
                ({}, {"GROUP_M": 8, "NUM_XCDS": 8}, {"SPLIT_K": 4}, {"NUM_SMS": 304})):
            launch = gemm(s, bm, bn, bk, warps, stages, kc, grid=304 if "NUM_SMS" in extra else None, **extra)
            try:
                total, _ = capture_time_us(Capture(shape=s, launches=[launch]), DEVICES[device])
            except ModelInfeasible:
                continue
            assert total >= sol, (device, s, bm, bn, bk, warps, stages, kc, extra)
