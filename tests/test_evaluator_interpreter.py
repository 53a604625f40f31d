"""The fork server's shortcuts in Triton's CPU interpreter change no result: a kernel with integer
arithmetic and ``@triton.jit`` helpers gives the same bytes with and without them; the overflow
check still runs when debug is on; a remembered patch is redone once its namespaces change."""

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
    from kernel_scientist.evaluator import _interpreter

    @triton.jit
    def scaled_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        blocks = tl.cdiv(n, BLOCK)  # a jit helper of Triton's own
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        x = tl.load(x_ptr + offs * 1 + 0, mask=offs < n, other=0.0)
        acc += x * (blocks - pid)
        tl.store(out_ptr + offs, acc, mask=offs < n)

    def run():
        x = torch.arange(200, dtype=torch.float32) / 7
        out = torch.zeros_like(x)
        scaled_sum[(4,)](x, out, 200, BLOCK=64)
        return out.numpy().tobytes().hex()

    plain = run()
    applied = [_interpreter.skip_unchecked_overflow(), _interpreter.remember_lang_patches(),
               _interpreter.rewrite_library_helpers() > 0]
    patched, again = run(), run()

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
                      "remembered": remembered,
                      "caught": caught}))
    """
)


def test_the_interpreter_shortcuts_change_no_result():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["applied"] == [True, True, True]
    assert got["same"]
    assert got["remembered"] == [True, 0, True]
    assert "overflow detected" in got["caught"]
