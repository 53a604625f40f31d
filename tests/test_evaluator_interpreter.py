"""The fork server's shortcuts in Triton's CPU interpreter change no result: a kernel with integer
arithmetic and ``@triton.jit`` helpers, an fp8 ``tl.dot``, and reductions and scans with combine
functions of the kernel's own (NaN-propagating max, an argmax whose ties keep the left index, sums
of small integers, which any order adds exactly) give the same bytes with and without them; the overflow check still runs when debug is on; a remembered patch is redone once its
namespaces change; the fp8 table and the dtype table answer as the functions they stand in for, on
every input; a kernel is rewritten with the file and line Triton's own JITFunction gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent(
    """
    import dataclasses, json
    import numpy as np, torch, triton, triton.language as tl
    from triton.runtime import interpreter
    from triton.language.semantic import TritonSemantic
    from kernel_scientist.evaluator.sandbox import _interpreter

    @triton.jit
    def scaled_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        blocks = tl.cdiv(n, BLOCK)  # a jit helper of Triton's own
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        x = tl.load(x_ptr + offs * 1 + 0, mask=offs < n, other=0.0)
        acc += x * (blocks - pid)
        tl.store(out_ptr + offs, acc, mask=offs < n)

    @triton.jit
    def fp8_dot(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tile = offs[:, None] * BLOCK + offs[None, :]
        c = tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile))
        tl.store(c_ptr + tile, c)

    @triton.jit
    def nan_max(a, b):  # Inductor's maximum: NaN wins
        m = (a > b) | (a != a)
        return tl.where(m, a, b)

    @triton.jit
    def argmax_left(a, ia, b, ib):  # associative, not commutative: ties keep the left index
        take = (a > b) | ((a == b) & (ia < ib))
        return tl.where(take, a, b), tl.where(take, ia, ib)

    @triton.jit
    def add(a, b):
        return a + b

    @triton.jit
    def own_combines(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
        r = tl.arange(0, R)[:, None]
        c = tl.arange(0, C)[None, :]
        v = tl.load(x_ptr + r * C + c)
        _, first = tl.reduce((v, tl.broadcast_to(c, (R, C))), 1, argmax_left)
        tl.store(out_ptr + tl.arange(0, R), tl.reduce(v, 1, nan_max))
        tl.store(out_ptr + R + tl.arange(0, R), first.to(tl.float32))
        tl.store(out_ptr + 2 * R + tl.arange(0, C), tl.reduce(v, 0, add))
        tl.store(out_ptr + 2 * R + C + r * C + c, tl.associative_scan(v, 1, add))
        tl.store(out_ptr + 2 * R + C + R * C + r * C + c, tl.associative_scan(v, 0, nan_max, reverse=True))

    def run():
        y = torch.randint(-4, 4, (4, 32), generator=torch.Generator().manual_seed(1)).float()  # ties, exact sums
        y[1, 3] = float("nan")
        combined = torch.zeros(2 * 4 + 32 + 2 * 4 * 32)
        own_combines[(1,)](y, combined, R=4, C=32)
        x = torch.arange(200, dtype=torch.float32) / 7
        out = torch.zeros_like(x)
        scaled_sum[(4,)](x, out, 200, BLOCK=64)
        gen = torch.Generator().manual_seed(0)
        a, b = (torch.randn((16, 16), generator=gen).mul(64).to(torch.float8_e4m3fn) for _ in range(2))
        c = torch.zeros((16, 16), dtype=torch.float32)
        fp8_dot[(1,)](a, b, c, BLOCK=16)
        return out.numpy().tobytes().hex() + c.numpy().tobytes().hex() + combined.numpy().tobytes().hex()

    plain = run()
    original = {"convert": interpreter._convert_float, "np_dtype": interpreter._get_np_dtype}
    rewriter = interpreter.FunctionRewriter(scaled_sum.fn)
    jit_file_line = list(rewriter._get_jit_fn_file_line())
    interpreter.InterpretedFunction.rewritten_fn.clear()  # rewritten again below, patched
    applied = _interpreter.remove_repeated_work()
    patched, again = run(), run()
    rewriter.rewrite_ast()
    one_reading = [rewriter.filename, rewriter.def_file_lineno] == jit_file_line

    def outcome(fn, *args):
        try:
            got = fn(*args)
        except Exception as exc:
            return type(exc).__name__
        return (str(got.dtype), got.shape, got.tobytes().hex()) if isinstance(got, np.ndarray) else str(got)

    from triton._C.libtriton import ir
    rng = np.random.default_rng(0)
    every = np.arange(256, dtype=np.uint8)
    tables_differ = []
    for src in (tl.float8e5, tl.float8e5b16, tl.float8e4nv, tl.float8e4b8, tl.float8e4b15):
        for dst in (tl.float16, tl.bfloat16, tl.float32):
            for mode in (None, ir.ROUNDING_MODE.RTNE, ir.ROUNDING_MODE.RTZ):
                inputs = [every, every[::-1].reshape(16, 16).T, rng.integers(0, 256, (3, 5, 7), dtype=np.uint8)[:, ::2]]
                inputs += [every[i : i + 1] for i in range(256)]  # alone: none of the other branches taken
                for x in inputs:
                    if outcome(original["convert"], x, src, dst, mode) != outcome(interpreter._convert_float, x, src, dst, mode):
                        tables_differ.append(f"{src} -> {dst} ({mode})")
                        break
    types = [v for v in vars(tl).values() if isinstance(v, tl.dtype)]
    types += [tl.pointer_type(t) for t in types if t != tl.void] + [tl.block_type(t, [4]) for t in types]
    types += [tl.block_type(tl.pointer_type(tl.float32), [4])]
    dtypes_differ = [str(t) for t in types if outcome(original["np_dtype"], t) != outcome(interpreter._get_np_dtype, t)]

    # A remembered patch: the second call for the same modules has nothing to do; a change to
    # one of their namespaces makes the next call run in full.
    fn = scaled_sum.fn
    first = interpreter._patch_lang(fn)
    second = interpreter._patch_lang(fn)
    tl.core.ks_probe = 1
    third = interpreter._patch_lang(fn)
    remembered = [len(first._changes) > 0, len(second._changes), len(third._changes) > 0]
    for scope in (third, second, first):  # undone as a launch undoes its own
        scope.restore()
    del tl.core.ks_probe

    # With debug on, the overflow check still runs and still fails.
    interpreter.interpreter_builder.options = dataclasses.replace(
        interpreter.interpreter_builder.options, debug=True)
    try:
        x = torch.zeros(4, dtype=torch.int32)
        @triton.jit
        def overflow(x_ptr):
            big = tl.load(x_ptr) + 2147483647
            tl.store(x_ptr, big + 1)
        overflow[(1,)](x)
        caught = ""
    except Exception as exc:
        caught = repr(exc)
    print(json.dumps({"applied": applied, "same": plain == patched == again,
                      "remembered": remembered, "one_reading": one_reading,
                      "tables_differ": tables_differ, "dtypes_differ": dtypes_differ,
                      "caught": caught}))
    """
)


def test_the_interpreter_shortcuts_change_no_result(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    script = tmp_path / "shortcuts.py"  # a file: the interpreter rewrites kernels it can read the source of
    script.write_text(_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["applied"] == dict.fromkeys(got["applied"], True) and len(got["applied"]) == 7
    assert got["same"]
    assert got["one_reading"]
    assert got["tables_differ"] == [] and got["dtypes_differ"] == []
    assert got["remembered"] == [True, 0, True]
    assert "overflow detected" in got["caught"]
