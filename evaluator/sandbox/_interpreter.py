"""Work Triton's CPU interpreter does for nothing, removed once in the fork server before any fork.

Profiling the main job (py-spy over the fork server and its children) put 60% of the
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

Three smaller ones come from a profile of the main job's children (py-spy):

- ``_convert_float`` widens fp8 to fp16 bit by bit in numpy (about twenty array operations, twice
  per ``tl.dot``, 6% of a child): a function of each element's 8 bits alone, so for an 8-bit input
  ``convert_fp8_by_table`` looks the answer up in the 256 results of the same function, computed
  once per pair of types and rounding mode;
- ``_get_np_dtype`` builds its table of 17 types on every call (every load, store and cast; 3%):
  ``table_np_dtypes`` builds it once from the function itself, and asks it for any type not in it;
- the interpreter's ``FunctionRewriter`` reads a kernel's source, then builds a whole
  ``JITFunction`` (which reads and tokenizes the same source again) only for its file name and
  the line of its ``def``: ``rewrite_from_one_reading`` takes both from the first reading, by the
  functions ``JITFunction`` itself uses, and leaves to the original every case where building it
  would fail.

All six run in the fork server (trusted code, before any candidate exists); every child inherits
them. The interpreter's results are unchanged, so are the evaluator's: the main job's blackboard
is identical record for record with and without them (docs/evaluator.md, "Wall time").

A seventh changes the order of a computation, not its meaning: ``reduce_and_scan_by_halves``.
``tl.reduce`` and ``tl.associative_scan`` with a combine function of the kernel's own (every
reduction and scan Inductor writes: its max and min propagate NaN, its scans carry their own
combine) fell to the interpreter's element-by-element loop, one interpreted call per element: a
lowered row reduction took 8 s a program, and its evaluation ran past its limit. Both operations
require an associative combine function, and a GPU applies it in a tree, not left to right; so
the reduction combines neighbouring pairs, halving the axis each time (log2 n calls on whole
arrays), and the scan adds in the value 2^k places earlier for k = 0, 1, ... (Hillis and Steele).
Neighbours stay in order, so a combine that is associative but not commutative (an argmax that
keeps the left index on ties) gives the same answer; a floating-point sum may round differently
in its last bits, as it does between a GPU's tree and a sequential loop.
"""

from __future__ import annotations

import inspect
import operator
import re
import textwrap
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

_GATE = "if not self.builder.options.debug:"


def remove_repeated_work() -> dict[str, bool]:
    """Every shortcut of this module, in the fork server before any fork; which ones applied."""
    return {
        "skip_unchecked_overflow": skip_unchecked_overflow(),
        "remember_lang_patches": remember_lang_patches(),
        "rewrite_from_one_reading": rewrite_from_one_reading(),
        "rewrite_library_helpers": rewrite_library_helpers() > 0,
        "convert_fp8_by_table": convert_fp8_by_table(),
        "table_np_dtypes": table_np_dtypes(),
        "reduce_and_scan_by_halves": reduce_and_scan_by_halves(),
    }


# The live namespaces ``remember_lang_patches`` watches: each one's keys and values, in order.
_Namespaces = list[tuple[tuple[str, ...], tuple[object, ...]]]


def _install(owner: object, wrapper: Callable[..., object], original: object, mark: str) -> bool:
    """Put ``wrapper`` in place of ``owner``'s attribute of the same name, marked ``mark`` (so that
    a second call finds it applied) and with ``__wrapped__`` naming ``original``; True."""
    vars(wrapper).update({mark: True, "__wrapped__": original})  # a function's attributes
    setattr(owner, wrapper.__name__, wrapper)
    return True


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

    def binary_op_sanitize_overflow_impl(self: TritonSemantic, lhs: object, rhs: object, binary_op: object) -> object:
        if not self.builder.options.debug:  # device_assert would drop the condition unchecked
            return None
        return original(self, lhs, rhs, binary_op)

    return _install(TritonSemantic, binary_op_sanitize_overflow_impl, original, "_ks_skips_unchecked")


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
    after: dict[tuple[int, ...], _Namespaces] = {}  # holds the objects: no id is reused

    def state() -> _Namespaces:
        return [(tuple(d), tuple(d.values())) for d in spaces]

    def unchanged(then: _Namespaces, now: _Namespaces) -> bool:
        return all(
            keys == keys_now and len(values) == len(values_now) and all(map(operator.is_, values, values_now))
            for (keys, values), (keys_now, values_now) in zip(then, now, strict=True)
        )

    def _patch_lang(fn: types.FunctionType) -> object:
        key = tuple(id(v) for v in fn.__globals__.values() if v is tl or v is tl.core)
        if key and key in after and unchanged(after[key], state()):
            return interpreter._LangPatchScope()  # patched already: nothing to do, nothing to undo
        scope = original(fn)
        after[key] = state()
        return scope

    return _install(interpreter, _patch_lang, original, "_ks_remembers")


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
            except Exception:  # noqa: BLE001 - left to the child's first call
                continue
            done += 1
    return done


def convert_fp8_by_table() -> bool:
    """Wrap the interpreter's ``_convert_float`` (see the module note); True when applied."""
    import numpy as np
    from triton.runtime import interpreter

    original = getattr(interpreter, "_convert_float", None)
    if original is None:
        return False
    if getattr(original, "_ks_table", False):
        return True
    tables: dict[tuple[object, object, object], npt.NDArray[Any]] = {}
    every_byte = np.arange(256, dtype=np.uint8)

    def _convert_float(
        input: npt.NDArray[Any], input_dtype: object, output_dtype: object, rounding_mode: object
    ) -> object:
        # Elementwise in each element's bits (its branches only touch the elements they select),
        # so the 256 answers for an 8-bit type are the whole function; any other input goes to the original.
        if getattr(input_dtype, "primitive_bitwidth", None) != 8 or getattr(input, "dtype", None) is None:
            return original(input, input_dtype, output_dtype, rounding_mode)
        if input.dtype.itemsize != 1:
            return original(input, input_dtype, output_dtype, rounding_mode)
        key = (input_dtype, output_dtype, rounding_mode)
        table = tables.get(key)
        if table is None:
            table = tables[key] = original(every_byte, input_dtype, output_dtype, rounding_mode)
        return table[np.frombuffer(input.tobytes(), dtype=np.uint8)].reshape(input.shape)

    return _install(interpreter, _convert_float, original, "_ks_table")


def table_np_dtypes() -> bool:
    """Replace the interpreter's ``_get_np_dtype`` (see the module note); True when applied, which
    is only where the original reads as this module expects (the branches below, then its table)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    original = getattr(interpreter, "_get_np_dtype", None)
    if original is None:
        return False
    if getattr(original, "_ks_table", False):
        return True
    try:
        body = _body(original)
    except (OSError, TypeError):
        return False
    if not all(line in body for line in _NP_DTYPE_LINES):
        return False
    scalars: dict[object, object] = {}
    for value in vars(tl).values():
        if isinstance(value, tl.dtype) and not isinstance(value, (tl.pointer_type, tl.block_type)):
            try:
                scalars[value] = original(value)
            except Exception:  # noqa: BLE001 - not in its table (void): left to the original
                continue

    def _get_np_dtype(tt_dtype: object) -> object:
        if isinstance(tt_dtype, tl.pointer_type):
            return np.dtype(np.uint64)
        key = tt_dtype
        if isinstance(tt_dtype, tl.block_type):
            if isinstance(tt_dtype.element_ty, tl.pointer_type):
                return np.dtype(np.uint64)
            key = tt_dtype.element_ty
        try:
            return scalars[key]
        except (KeyError, TypeError):  # not in the table: the original answers, or fails its own way
            return original(tt_dtype)

    return _install(interpreter, _get_np_dtype, original, "_ks_table")


_NP_DTYPE_LINES = (
    "if isinstance(tt_dtype, tl.pointer_type):\nreturn np.dtype(np.uint64)\nnp_types = {",
    "if isinstance(tt_dtype, tl.block_type):\nif isinstance(tt_dtype.element_ty, tl.pointer_type):\n"
    "return np.dtype(np.uint64)\nreturn np_types[tt_dtype.element_ty]\nreturn np_types[tt_dtype]",
)


# What rewrite_from_one_reading stands in for: the interpreter's rewrite_ast and the helper that
# builds a JITFunction for two of its fields, as Triton 3.4-3.8 write them.
_REWRITE_AST = """\
lines, _ = inspect.getsourcelines(self.fn)
except Exception:
return self.fn
self.filename, self.def_file_lineno = self._get_jit_fn_file_line()
self.def_lineno = self._find_def(lines)
src = self._prepare_source(lines)
transformed_ast = self._transform_ast(src)
return self._compile_and_exec(transformed_ast)"""
_FILE_LINE = """\
jit_func = JITFunction(self.fn)
return jit_func.file_name, jit_func.def_file_line_number"""


def _body(fn: Callable[..., object]) -> str:
    lines = [ln.strip() for ln in inspect.getsource(fn).splitlines()]
    return "\n".join(ln for ln in lines if ln and not ln.startswith(("#", "def ", "try:", "from ")))


def rewrite_from_one_reading() -> bool:
    """Replace ``FunctionRewriter.rewrite_ast`` (see the module note); True when applied, which is
    only where Triton's two methods read as this module expects."""
    from triton.runtime import interpreter, jit

    rewriter = getattr(interpreter, "FunctionRewriter", None)
    original = getattr(rewriter, "rewrite_ast", None)
    if rewriter is None or original is None:
        return False
    if getattr(original, "_ks_one_reading", False):
        return True
    try:
        expected = _body(original) == _REWRITE_AST and _body(rewriter._get_jit_fn_file_line) == _FILE_LINE
    except (OSError, TypeError, AttributeError):
        expected = False
    indent, def_line = getattr(jit, "INDENT_PATTERN", None), getattr(jit, "get_def_line_number", None)
    if not expected or indent is None or def_line is None:
        return False

    def file_line(fn: object, lines: list[str], start: int) -> tuple[str, int] | None:
        """JITFunction(fn).file_name and .def_file_line_number from the same lines, or None
        where building that JITFunction would raise (then the original runs and raises it)."""
        if not isinstance(fn, types.FunctionType):
            return None
        raw = "".join(lines)
        src = textwrap.dedent(raw)
        if indent.search(raw) is None or re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE) is None:
            return None
        return fn.__code__.co_filename, def_line(lines, start)

    def rewrite_ast(self: interpreter.FunctionRewriter) -> object:
        try:
            lines, start = inspect.getsourcelines(self.fn)
        except Exception:
            return self.fn
        found = file_line(self.fn, lines, start)
        if found is None:
            return original(self)
        self.filename, self.def_file_lineno = found
        self.def_lineno = self._find_def(lines)
        src = self._prepare_source(lines)
        transformed_ast = self._transform_ast(src)
        return self._compile_and_exec(transformed_ast)

    return _install(rewriter, rewrite_ast, original, "_ks_one_reading")


def _combined(out: object, like: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A combine function's result as an array of ``like``'s shape and type (it may return a
    tensor, a constexpr or a plain number for a part that does not depend on its inputs)."""
    value = getattr(out, "handle", None)
    data = value.data if value is not None else getattr(out, "value", out)
    return np.broadcast_to(np.asarray(data), like.shape).astype(like.dtype)


def reduce_and_scan_by_halves() -> bool:
    """Replace the interpreter's element-by-element ``generic_reduce`` and ``generic_scan`` (see
    the module note); True when applied, which is only where both exist as this module expects."""
    from triton.runtime import interpreter

    reduce_ops = getattr(interpreter, "ReduceOps", None)
    scan_ops = getattr(interpreter, "ScanOps", None)
    if reduce_ops is None or scan_ops is None:
        return False
    original_reduce = getattr(reduce_ops, "generic_reduce", None)
    original_scan = getattr(scan_ops, "generic_scan", None)
    if original_reduce is None or original_scan is None:
        return False
    if getattr(original_reduce, "_ks_by_halves", False):
        return True

    def combine(op: Any, dtypes: list[Any], left: list[Any], right: list[Any]) -> list[npt.NDArray[Any]]:
        out = op.combine_fn.fn(
            *(op.to_tensor(x, t) for x, t in zip(left, dtypes)), *(op.to_tensor(x, t) for x, t in zip(right, dtypes))
        )
        return [_combined(o, x) for o, x in zip(out if isinstance(out, tuple) else (out,), left)]

    def generic_reduce(self: Any, input: tuple[Any, ...]) -> list[Any]:
        original_axis = self.axis
        tensors, axis = self.unravel(input, self.axis)
        dtypes = [t.dtype for t in tensors]
        data = [np.moveaxis(t.handle.data, axis, -1) for t in tensors]
        while data[0].shape[-1] > 1:  # a block's sizes are powers of two: the halves are blocks too
            data = combine(self, dtypes, [d[..., 0::2] for d in data], [d[..., 1::2] for d in data])
        out = []
        for d, t in zip(data, dtypes):
            value = d[..., 0]
            if self.keep_dims:
                value = np.expand_dims(value, axis) if original_axis is not None else value.reshape((1,) * d.ndim)
            elif original_axis is None:
                value = value.item()
            out.append(self.to_tensor(value, t))
        return out

    def generic_scan(self: Any, input: tuple[Any, ...]) -> list[Any]:
        dtypes = [t.dtype for t in input]
        data = [np.moveaxis(t.handle.data, self.axis, -1) for t in input]
        n, step = data[0].shape[-1], 1
        while step < n:
            # Whole blocks (a block's sizes are powers of two): each value combined with the one
            # ``step`` places earlier; the first ``step`` are paired with themselves and kept as they were.
            earlier = [np.concatenate([d[..., :step], d[..., : n - step]], axis=-1) for d in data]
            sums = combine(self, dtypes, earlier, data)
            data = [np.concatenate([d[..., :step], s[..., step:]], axis=-1) for d, s in zip(data, sums)]
            step *= 2
        return [self.to_tensor(np.moveaxis(d, -1, self.axis), t) for d, t in zip(data, dtypes)]

    _install(reduce_ops, generic_reduce, original_reduce, "_ks_by_halves")
    return _install(scan_ops, generic_scan, original_scan, "_ks_by_halves")
