"""Work Triton's CPU interpreter does for nothing, removed once in the fork server before any fork.

Profiling the main job (py-spy over the fork server and its children, 2026-12-01) put 60% of the
candidates' CPU time in the interpreter's semantic layer, and almost half of that in one place:
``TritonSemantic.binary_op_sanitize_overflow_impl``. Every integer ``+``, ``-`` and ``*`` in a
kernel (offsets, strides, program ids) calls it: it casts both operands to int64, redoes the
operation, compares the result with the type's bounds, and hands the condition to
``device_assert``, which returns at once unless the launch options have ``debug`` set. The
interpreter's options never do (``InterpreterOptions.debug`` is False; no launch argument changes
it). So the condition is computed and dropped: about eight extra tensor operations per integer
operation, with no effect on any value, any exception or any output.

``skip_unchecked_overflow`` returns before that work when, and only when, ``device_assert`` would
drop it: it reads the same ``options.debug`` at the same moment, so a process that turns debug on
still gets the full check. It is applied only if Triton's ``device_assert`` is the debug-gated one
this note describes (read from its source), so a Triton whose assert checks always is left alone.

The next largest waste (15% of the children's time) is ``_patch_lang``, which points
``triton.language``'s builtins at the interpreter. A launch calls it once and undoes it at the
end; but every call of a ``@triton.jit`` helper inside a kernel (``tl.cdiv`` too) calls it again,
and each call walks every member of ``tl``, ``tl.core``, ``tl.math`` and the tensor classes with
``inspect.getmembers`` only to find them patched already. ``remember_lang_patches`` skips a call
when the same modules were patched by the previous call for them and nothing in those namespaces
has changed since (every entry still the same object): the call would then only re-create
equivalent lambdas. Any change (the launch's own undo, anything a candidate assigns) means the
full call runs.

Every candidate of the main job calls ``tl.cdiv`` and ``tl.zeros``, which are ``@triton.jit``
functions of Triton's own ``triton.language.standard``: each child read their source, rewrote
and compiled them again. ``rewrite_library_helpers`` does that once, in the server, filling the
interpreter's own cache of rewritten functions, as the first call in a child would.

All three run in the fork server (trusted code, before any candidate exists); every child inherits
them. The interpreter's results are unchanged, so are the evaluator's: the main job's blackboard
is identical record for record with and without them (docs/evaluator.md, "Wall time").
"""

from __future__ import annotations

import inspect
import operator

_GATE = "if not self.builder.options.debug:"


def skip_unchecked_overflow() -> bool:
    """Patch ``TritonSemantic`` (see the module note); True when applied."""
    from triton.language.semantic import TritonSemantic

    original = TritonSemantic.binary_op_sanitize_overflow_impl
    if getattr(original, "_ks_skips_unchecked", False):
        return True
    try:
        gated = _GATE in inspect.getsource(TritonSemantic.device_assert)
    except (OSError, TypeError):
        gated = False
    if not gated:
        return False

    def binary_op_sanitize_overflow_impl(self, lhs, rhs, binary_op):
        if not self.builder.options.debug:  # device_assert would drop the condition unchecked
            return None
        return original(self, lhs, rhs, binary_op)

    binary_op_sanitize_overflow_impl._ks_skips_unchecked = True  # type: ignore[attr-defined]
    binary_op_sanitize_overflow_impl.__wrapped__ = original  # type: ignore[attr-defined]
    TritonSemantic.binary_op_sanitize_overflow_impl = binary_op_sanitize_overflow_impl
    return True


def remember_lang_patches() -> bool:
    """Wrap the interpreter's ``_patch_lang`` (see the module note); True when applied."""
    import triton.language as tl
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang", None)
    if original is None or not hasattr(interpreter, "_LangPatchScope"):
        return False
    if getattr(original, "_ks_remembers", False):
        return True
    classes = {
        c for base in (tl.tensor, tl.core.tensor, tl.core.tensor_descriptor_base, tl.dtype) for c in base.__mro__
    }
    spaces = [vars(tl), vars(tl.core), vars(tl.math), *(vars(c) for c in classes)]  # live views
    after: dict[tuple[int, ...], list[tuple[tuple, tuple]]] = {}  # holds the objects: no id is reused

    def state() -> list[tuple[tuple, tuple]]:
        return [(tuple(d), tuple(d.values())) for d in spaces]

    def unchanged(then: list[tuple[tuple, tuple]], now: list[tuple[tuple, tuple]]) -> bool:
        return all(
            keys == keys_now and len(values) == len(values_now) and all(map(operator.is_, values, values_now))
            for (keys, values), (keys_now, values_now) in zip(then, now, strict=True)
        )

    def _patch_lang(fn):
        key = tuple(id(v) for v in fn.__globals__.values() if v is tl or v is tl.core)
        if key and key in after and unchanged(after[key], state()):
            return interpreter._LangPatchScope()  # patched already: nothing to do, nothing to undo
        scope = original(fn)
        after[key] = state()
        return scope

    _patch_lang._ks_remembers = True  # type: ignore[attr-defined]
    _patch_lang.__wrapped__ = original  # type: ignore[attr-defined]
    interpreter._patch_lang = _patch_lang
    return True


def rewrite_library_helpers() -> int:
    """Rewrite the ``@triton.jit`` functions of ``triton.language.standard`` for the interpreter
    (see the module note); returns how many are in the interpreter's cache."""
    import triton.language.standard as standard
    from triton.runtime.interpreter import InterpretedFunction

    done = 0
    for value in list(vars(standard).values()):
        if isinstance(value, InterpretedFunction):
            try:
                value.rewrite()
            except Exception:  # noqa: BLE001 - left to the child's first call, as before
                continue
            done += 1
    return done
