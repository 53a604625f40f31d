"""Problem folders in GPU MODE's reference-kernels format, read into a ``Task``.

A folder holds ``task.yml`` (files to assemble, tests, benchmarks, ranking), ``reference.py``
(``generate_input``, ``ref_kernel``, ``check_implementation``), ``task.py`` (type aliases) and
usually shared helpers from its parent (``../utils.py``, ``../eval.py``). We read the yml into
Structs (decoding is validation) but do not forbid unknown fields: the format belongs to someone
else and grows keys we do not use.

The folder decides everything about its problem: a test is whatever keyword arguments its
``generate_input`` takes (``Shape``); the helper modules are the ``files:`` list's, served under
their run-directory names while the reference loads; correctness is its own
``check_implementation`` (``check_failure``); ``ranking_by`` picks the score's mean. What only a
matrix product has (scaled-down check shapes, a speed of light, the heavy-op rule's flop count) is
optional metadata under a ``kernel_scientist:`` key of task.yml (``TaskMeta``); a folder without it
gets sensible defaults: the CPU checks use its smallest tests, and its speed of light is a lower
bound derived from the bytes its tensors hold (``io_bytes``), labelled as such wherever it shows.

``Task.kind`` says what the task computes (matrix product, elementwise, reduction, scan, sort):
declared, else read from the syntax of the reference's ``ref_kernel``, a reduction checked on meta
tensors at the largest benchmark (one narrower than a warp is elementwise). Retrieval and the
digests the agents see follow it, so a grayscale conversion is not handed fp8 GEMM advice.

``check_shapes`` for a GEMM folder (``check: scaled-gemm``) are scaled-down stand-ins for the tests
that the Triton CPU interpreter can run in a fraction of a second. They keep the tests' edge cases
(n % 128 == 64, m not a multiple of 64, a single K block, several K blocks) and drop the sizes; the
CPU verdict is a pre-screen, a real GPU's verdict is the one that counts (docs/stack-pitfalls.md).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal, Protocol

import msgspec
from kernel_scientist.blackboard.metrics import SolBasis
from kernel_scientist.blackboard.records import Param, Shape

if TYPE_CHECKING:
    import torch
    from torch._ops import OpOverload


class TaskError(Exception):
    """A task folder that cannot be used; the message names the file and the problem."""


class _FileEntry(msgspec.Struct, frozen=True):
    name: str
    source: str


# What a task computes, the one vocabulary for it (knowledge/_docs.py keeps a copy for the digests'
# tags, since knowledge cannot import the evaluator; tests/test_task_kind.py holds them equal).
TaskKind = Literal["matrix product", "elementwise", "reduction", "scan", "sort"]


class TaskMeta(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Our optional metadata for a folder (task.yml key ``kernel_scientist:``). Ours, so strict.

    ``flops``/``bytes`` are arithmetic over generate_input's arguments (``2*m*n*k``,
    ``4*size + 4``): the task's useful work and compulsory traffic. With either, the speed of
    light is computed from them at the ``peak`` rate; without both it is a lower bound from the
    tensors' own bytes (``Task.io_bytes``). ``output`` is the position of a preallocated output in
    the input tuple (NaN-filled before every call, so a skipped write cannot pass as the
    generator's zeros). ``gemm``: the techniques for matrix products apply and a torch matmul doing
    a quarter of ``flops`` is the reference's work, not the kernel's. ``kind``: what the task
    computes, when reading ``ref_kernel`` would get it wrong.
    """

    flops: str = ""
    bytes: str = ""
    peak: Literal["fp8", "bf16", "fp32_matrix", "fp32"] = "fp32"
    output: int | None = None
    gemm: bool = False
    kind: TaskKind | None = None
    # CPU check shapes: the smallest tests, the GEMM tests scaled down, or an explicit list.
    check: Literal["smallest", "scaled-gemm"] | list[dict[str, Param]] = "smallest"


class _TaskYml(msgspec.Struct, frozen=True):
    files: list[_FileEntry] = []
    lang: str = "py"
    description: str = ""
    tests: list[dict[str, Param]] = []
    benchmarks: list[dict[str, Param]] = []
    ranking_by: Literal["geom", "mean", "last"] = "geom"
    kernel_scientist: TaskMeta = TaskMeta()


class Peaks(Protocol):
    """A device's peak rates, what a speed of light divides by (``model.DeviceSpec`` has them;
    the model imports this module, so not the other way round)."""

    @property
    def fp8_tflops(self) -> float: ...
    @property
    def bf16_tflops(self) -> float: ...
    @property
    def fp32_matrix_tflops(self) -> float: ...
    @property
    def vector_fp32_tflops(self) -> float: ...
    @property
    def hbm_tbps(self) -> float: ...


class Task(msgspec.Struct, frozen=True):
    name: str
    path: str
    description: str
    tests: list[Shape]
    benchmarks: list[Shape]
    ranking_by: str
    check_shapes: list[Shape]
    seed_source: str | None = None
    # run-directory name without ".py" -> file, as the files: list assembles them (task, utils,
    # reference, eval...): what reference.py's own imports find.
    modules: dict[str, str] = {}
    meta: TaskMeta = TaskMeta()
    reference_source: str = ""  # reference.py, for the language-model brains' prompts

    def flops(self, shape: Shape) -> float | None:
        return task_flops(self.meta, shape)

    def kernels(self) -> Literal["gemm", "any"]:
        """Which technique catalogue fits the task's kernels: "gemm" when it declares itself a
        matrix product or every test is exactly m, n, k (the convention of GEMM folders), else
        "any" (techniques that work on any Triton kernel)."""
        return "gemm" if self.meta.gemm or all(t.is_mnk() for t in self.tests) else "any"

    def kind(self) -> TaskKind:
        """What the task computes: declared (``kind``, or ``gemm: true`` for a matrix product),
        else read from ``ref_kernel``'s syntax (``reference_kind``). A reduction by syntax whose
        reference, run on meta tensors for the largest benchmark, combines fewer than
        ``WARP_LANES`` elements in every reduction is elementwise: a grayscale conversion sums
        three channels per pixel, work one thread does from a few loads, not a reduction across
        lanes."""
        if self.meta.kind is not None:
            return self.meta.kind
        if self.meta.gemm:
            return "matrix product"
        kind = reference_kind(self.reference_source)
        if kind == "reduction" and self.benchmarks:
            io = self.io_bytes(max(self.benchmarks, key=lambda s: s.work()))
            widest = None if isinstance(io, str) else io.widest_reduction
            if widest and widest < WARP_LANES:  # 0: the run saw no reduction, so it proves nothing
                return "elementwise"
        return kind

    def sol_basis(self) -> SolBasis:
        """ "declared" when the folder declares flops or bytes, else "io-bytes": the speed of light
        is then only a lower bound from the tensors' sizes, and every surface says so."""
        return "declared" if self.meta.flops or self.meta.bytes else "io-bytes"

    def io_bytes(self, shape: Shape) -> IOBytes | str:
        """The bytes one call on ``shape`` must move at least, from the tensors themselves (see
        ``IOBytes``); a one-line reason instead when generate_input cannot run without a GPU."""
        key = tuple(sorted(self.modules.items()))
        digest = hashlib.blake2b(self.reference_source.encode(), digest_size=8).hexdigest()
        return _io_bytes(key, digest, shape, self.meta.output)

    def no_sol_reason(self, shape: Shape) -> str:
        """Why ``shape`` has no speed of light, in one line for the findings and ``status`` ("no
        speed of light: generate_input cannot run without a GPU on size=1000 (...)"); empty where it
        has one."""
        io = self.io_bytes(shape) if self.sol_basis() == "io-bytes" else None
        return f"no speed of light: {io}" if isinstance(io, str) else ""

    def min_bytes(self, shape: Shape) -> float | None:
        """Compulsory traffic: the declared ``bytes``; without flops or bytes declared, the input
        and output bytes (None when they cannot be had)."""
        if self.meta.bytes:
            return arith(self.meta.bytes, shape.kwargs())
        if self.meta.flops:
            return None
        io = self.io_bytes(shape)
        return None if isinstance(io, str) else float(io.total)

    def speed_of_light_us(self, shape: Shape, dev: Peaks) -> float | None:
        """max(declared flops / the declared peak, declared bytes / HBM bandwidth) on ``dev``.
        A folder that declares neither gets its input and output bytes over peak HBM bandwidth
        instead (``sol_basis`` "io-bytes"): a lower bound wherever the kernel needs every input byte,
        since it reads each at least once and writes each output byte once; None when even those
        bytes cannot be had."""
        if self.sol_basis() == "io-bytes":
            least = self.min_bytes(shape)
            return None if least is None else least / (dev.hbm_tbps * 1e6)
        terms = []
        if self.meta.flops:
            peak = {
                "fp8": dev.fp8_tflops,
                "bf16": dev.bf16_tflops,
                "fp32_matrix": dev.fp32_matrix_tflops,
                "fp32": dev.vector_fp32_tflops,
            }[self.meta.peak]
            terms.append(arith(self.meta.flops, shape.kwargs()) / (peak * 1e6))
        if self.meta.bytes:
            terms.append(arith(self.meta.bytes, shape.kwargs()) / (dev.hbm_tbps * 1e6))
        return max(terms) if terms else None

    def score(self, times_us: list[float]) -> float:
        """The ranked shapes' times reduced as the folder's ``ranking_by`` says."""
        if self.ranking_by == "mean":
            return sum(times_us) / len(times_us)
        if self.ranking_by == "last":
            return times_us[-1]
        return geomean(times_us)


_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}
_FUNCS: dict[str, Callable[..., float]] = {
    "ceil": math.ceil,
    "floor": math.floor,
    "min": min,
    "max": max,
    "log2": math.log2,
}


def arith(text: str, names: dict[str, Param]) -> float:
    """Arithmetic over the shape's arguments; nothing else (no attribute, no call but _FUNCS)."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]  # type: ignore[return-value]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            return _FUNCS[node.func.id](*(ev(a) for a in node.args))
        raise ValueError(f"{ast.unparse(node)!r} is not arithmetic over {', '.join(names)}")

    return float(ev(ast.parse(text, mode="eval")))


def task_flops(meta: TaskMeta, shape: Shape) -> float | None:
    """The task's useful arithmetic on ``shape``: declared in its metadata, else a matrix
    product's 2mnk when the shape is exactly m, n, k, else unknown."""
    if meta.flops:
        return arith(meta.flops, shape.kwargs())
    if not shape.is_mnk():
        return None
    m, n, k = shape.mnk()
    return 2.0 * m * n * k


class IOBytes(msgspec.Struct, frozen=True):
    """The bytes one call moves at least, read from the tensors themselves: generate_input's on
    ``meta`` (sizes and no data, as launch capture has them; no GPU needed). Each storage counts
    once, at the smaller of its size and its views' bytes (an expanded scalar is one element, two
    views of one buffer one buffer). ``inputs``: what generate_input returns, a preallocated output
    among them (written, not read: its bytes still move once). ``outputs``: the reference's output
    where it is not an input's storage (an output written into an input is not counted twice);
    None when ref_kernel cannot run on meta tensors (``note`` says why; the inputs alone are still
    a lower bound). ``widest_reduction``: the most elements any one reduction of that run combined
    (0: it reduced nothing; None: it did not run), which ``Task.kind`` reads."""

    inputs: int
    outputs: int | None
    note: str = ""
    widest_reduction: int | None = None

    @property
    def total(self) -> int:
        return self.inputs + (self.outputs or 0)


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


@functools.lru_cache(maxsize=8)
def _reference(modules: tuple[tuple[str, str], ...], digest: str) -> ModuleType | str:
    """reference.py imported once per folder version (``digest``), or why it cannot be."""
    from kernel_scientist.evaluator.sandbox._rundir import import_reference

    try:
        return import_reference(dict(modules), alias="_ks_reference_io")
    except Exception as exc:  # the folder's code: any failure means no bound, said in one line
        return f"reference.py cannot be imported ({_one_line(exc)})"


def _storage_bytes(value: object) -> dict[int, int]:
    """Bytes per storage of every tensor in ``value`` (tuples, lists and dicts walked)."""
    import torch

    views: dict[int, int] = {}
    sizes: dict[int, int] = {}
    stack = [value]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            storage = x.untyped_storage()
            views[storage._cdata] = views.get(storage._cdata, 0) + x.numel() * x.element_size()
            sizes[storage._cdata] = storage.nbytes()
        elif isinstance(x, (tuple, list)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    return {key: min(views[key], sizes[key]) for key in views}


@functools.lru_cache(maxsize=512)
def _io_bytes(modules: tuple[tuple[str, str], ...], digest: str, shape: Shape, output: int | None) -> IOBytes | str:
    """``Task.io_bytes``: on ``meta`` first; a generator that computes on its data runs under
    FakeTensorMode on the CPU instead (as ``sandbox.meta_inputs`` does), the reference with it."""
    # _redirected: the folder's CUDA requests sent where we run, as generate_input does for its own
    from kernel_scientist.evaluator.sandbox._rundir import _redirected, generate_input
    from torch._subclasses.fake_tensor import FakeTensorMode

    ref = _reference(modules, digest)
    if isinstance(ref, str):
        return ref
    failure = ""
    for device in ("meta", "cpu"):
        with FakeTensorMode() if device == "cpu" else contextlib.nullcontext():
            try:
                data = generate_input(ref, shape, device)
            except Exception as exc:
                failure = failure or _one_line(exc)
                continue
            inputs = _storage_bytes(data)
            try:
                with _redirected(device), _reductions() as widths:
                    out = ref.ref_kernel(data)
            except Exception as exc:
                if output is not None:  # the output is among the inputs: nothing left uncounted
                    return IOBytes(inputs=sum(inputs.values()), outputs=0)
                note = f"output bytes not counted: ref_kernel cannot run without data ({_one_line(exc)})"
                return IOBytes(inputs=sum(inputs.values()), outputs=None, note=note)
            # A declared output is among the inputs: counted there, once.
            written = 0 if output is not None else sum(n for k, n in _storage_bytes(out).items() if k not in inputs)
            return IOBytes(inputs=sum(inputs.values()), outputs=written, widest_reduction=max(widths, default=0))
    return f"generate_input cannot run without a GPU on {shape.label()} ({failure})"


# A warp's lanes: a reduction over fewer elements than this is not spread across lanes but done by
# one thread per output from a few loads, elementwise work (``Task.kind``).
WARP_LANES = 32
# aten's reductions. Softmax combines along its ``dim`` and keeps its input's size; for the others,
# the input's elements over the output's are what one output combines. The norms' and the
# histograms' widths are not read: they count as wide.
_REDUCING = frozenset(
    "sum nansum mean nanmean prod amax amin aminmax argmax argmin max min any all var std var_mean "
    "std_mean linalg_vector_norm norm logsumexp median nanmedian mode count_nonzero".split()
)
_ALONG_DIM = frozenset({"_softmax", "_log_softmax"})
_WIDE = frozenset(
    "native_layer_norm native_group_norm native_batch_norm _fused_rms_norm bincount histc scatter_add "
    "scatter_reduce index_add".split()
)


def _reduced(name: str, args: tuple[object, ...], out: object) -> int | None:
    """How many elements one output of aten's ``name`` combines; None for an op that reduces
    nothing (``max.other`` is elementwise)."""
    import torch

    first = args[0] if args else None
    if name in _WIDE:
        return sys.maxsize
    if not isinstance(first, torch.Tensor) or name not in _REDUCING | _ALONG_DIM:
        return None
    if name in _ALONG_DIM:
        dim = args[1] if len(args) > 1 and isinstance(args[1], int) else -1
        return int(first.shape[dim]) if first.dim() else 1
    if len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].dim():  # max(a, b)
        return None
    result = out[0] if isinstance(out, (tuple, list)) and out else out
    return first.numel() // max(result.numel(), 1) if isinstance(result, torch.Tensor) else sys.maxsize


@contextlib.contextmanager
def _reductions() -> Iterator[list[int]]:
    """While the block runs, the width (``_reduced``) of every reduction aten runs, appended to the
    list it yields."""
    from kernel_scientist.evaluator.sandbox._hooks import dispatch_mode

    widths: list[int] = []

    def record(func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        out = func(*args, **kwargs)
        if (width := _reduced(func.overloadpacket.__name__, args, out)) is not None:
            widths.append(width)
        return out

    with dispatch_mode(record):
        yield widths


# ref_kernel's calls that say what the task computes. max/min reduce unless given a second tensor.
_KIND_CALLS: dict[str, TaskKind] = {
    **dict.fromkeys(
        "matmul mm bmm addmm addbmm baddbmm linear bilinear einsum tensordot conv1d conv2d conv3d "
        "conv_transpose1d conv_transpose2d conv_transpose3d scaled_dot_product_attention _scaled_mm".split(),
        "matrix product",
    ),
    **dict.fromkeys("sort argsort msort topk kthvalue unique".split(), "sort"),
    **dict.fromkeys("cumsum cumprod cummax cummin logcumsumexp associative_scan".split(), "scan"),
    **dict.fromkeys(
        "sum nansum mean nanmean prod amax amin aminmax argmax argmin max min norm vector_norm "
        "softmax log_softmax logsumexp var std var_mean std_mean median mode all any count_nonzero "
        "layer_norm group_norm batch_norm rms_norm normalize cross_entropy nll_loss dot vdot mv "
        "bincount histc histogram scatter_add scatter_reduce index_add".split(),
        "reduction",
    ),
}
# When a reference does several things, the costliest kind names the task (attention is a matrix
# product with a softmax, a layer norm a reduction with elementwise work around it).
_KIND_ORDER: tuple[TaskKind, ...] = ("matrix product", "sort", "scan", "reduction", "elementwise")


def _is_int(node: ast.expr) -> bool:
    try:
        return isinstance(ast.literal_eval(node), int)
    except ValueError:
        return False


def _call_kind(call: ast.Call) -> TaskKind | None:
    func = call.func
    if isinstance(func, ast.Name):
        name, method = func.id, False
        if name in {"sum", "max", "min", "any", "all", "sorted"}:  # Python's builtins, not torch's
            return None
    elif isinstance(func, ast.Attribute):
        name = func.attr
        method = not (isinstance(func.value, ast.Name) and func.value.id in {"torch", "F", "functional"})
    else:
        return None
    kind = _KIND_CALLS.get(name)
    if name in {"max", "min"}:  # torch.max(a, b) / a.max(b): elementwise; with a dim or alone: reduction
        others = call.args if method else call.args[1:]
        if others and not _is_int(others[0]):
            return None
    if name == "einsum" and len(call.args) <= 2:  # one operand: a sum over indices, not a product
        return "reduction"
    return kind


def reference_kind(source: str) -> TaskKind:
    """What ``ref_kernel`` computes, read from its syntax and that of the reference's own functions
    it calls: a matrix product (``@``, matmul, linear, conv...), a sort, a scan (cumsum...), a
    reduction (sum, amax, softmax, norm, bincount...), else elementwise. The costliest kind found
    wins (``_KIND_ORDER``). Unparsable source or no ``ref_kernel``: elementwise, the plainest."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return "elementwise"
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found: set[TaskKind] = set()
    todo, seen = ["ref_kernel"], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node in ast.walk(functions[name]):
            if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
                found.add("matrix product")
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name) and node.func.id in functions:
                    todo.append(node.func.id)
                elif (kind := _call_kind(node)) is not None:
                    found.add(kind)
    return next(k for k in _KIND_ORDER if k in found or k == "elementwise")


class _Signature(msgspec.Struct, frozen=True):
    """generate_input's parameters, read from reference.py's syntax (no torch import needed)."""

    names: list[str]
    required: list[str]
    open: bool  # it takes **kwargs


def _generator_signature(reference: Path) -> _Signature | None:
    try:
        tree = ast.parse(reference.read_text())
    except (OSError, SyntaxError, ValueError):
        return None  # importing it will say what is wrong, with its line
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "generate_input":
            a = node.args
            params = a.posonlyargs + a.args
            defaults = len(a.defaults)
            required = [p.arg for p in params[: len(params) - defaults]]
            required += [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
            names = [p.arg for p in params + a.kwonlyargs]
            return _Signature(names=names, required=[r for r in required if r != "device"], open=a.kwarg is not None)
    return None


def _shapes(entries: list[dict[str, Param]], where: str, sig: _Signature | None = None) -> list[Shape]:
    out = []
    for entry in entries:
        if "seed" in entry and not isinstance(entry["seed"], int):
            raise TaskError(f"{where}: entry {entry} has a seed that is not an integer")
        if sig is not None:
            wanted = f"generate_input({', '.join(sig.names)})"
            missing = [r for r in sig.required if r not in entry and r != "seed"]
            unknown = [k for k in entry if k not in sig.names and not sig.open]
            if missing:
                raise TaskError(f"{where}: entry {entry} lacks {', '.join(map(repr, missing))}, which {wanted} needs")
            if unknown:
                raise TaskError(
                    f"{where}: entry {entry} has {', '.join(map(repr, unknown))}, which {wanted} does not take"
                )
        out.append(Shape.of(entry))
    return out


def load_task(path: str | Path) -> Task:
    """Read a problem folder. Raises TaskError naming the file and the problem."""
    folder = Path(path).resolve()
    yml = folder / "task.yml"
    try:
        raw = yml.read_bytes()
    except OSError as exc:
        raise TaskError(f"{yml}: cannot read ({exc.strerror}); a task folder needs task.yml") from None
    try:
        spec = msgspec.yaml.decode(raw, type=_TaskYml)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise TaskError(f"{yml}: {exc}") from None
    for needed in ("reference.py", "task.py"):
        if not (folder / needed).is_file():
            raise TaskError(f"{folder / needed}: missing; the folder format needs it")
    modules: dict[str, str] = {}
    for entry in spec.files:
        if entry.source == "@SUBMISSION@" or not entry.name.endswith(".py"):
            continue
        file = (folder / entry.source).resolve()
        if not file.is_file():
            raise TaskError(f"{yml}: files entry {entry.name!r} points at {file}, which does not exist")
        modules[entry.name[:-3]] = str(file)
    modules.setdefault("task", str(folder / "task.py"))
    modules.setdefault("reference", str(folder / "reference.py"))
    sig = _generator_signature(folder / "reference.py")
    tests = _shapes(spec.tests, f"{yml} tests", sig)
    benchmarks = _shapes(spec.benchmarks, f"{yml} benchmarks", sig)
    if not tests or not benchmarks:
        raise TaskError(f"{yml}: needs non-empty tests: and benchmarks: lists")
    meta = spec.kernel_scientist
    for key in ("flops", "bytes"):
        text = getattr(meta, key)
        for s in [] if not text else tests + benchmarks:
            try:
                arith(text, s.kwargs())
            except (ValueError, SyntaxError, ArithmeticError, TypeError) as exc:
                raise TaskError(f"{yml}: kernel_scientist.{key} {text!r} on {s.label()}: {exc}") from None
    seed_file = folder / "submission.py"
    return Task(
        name=folder.name.replace("_", "-"),
        path=str(folder),
        description=spec.description.strip(),
        tests=tests,
        benchmarks=benchmarks,
        ranking_by=spec.ranking_by,
        check_shapes=_check_shapes(meta, tests, yml),
        seed_source=seed_file.read_text() if seed_file.is_file() else None,
        modules=modules,
        meta=meta,
        reference_source=(folder / "reference.py").read_text(),
    )


_SMALLEST = 3  # CPU check shapes of a folder without GEMM metadata: its three smallest tests


def _check_shapes(meta: TaskMeta, tests: list[Shape], yml: Path) -> list[Shape]:
    if isinstance(meta.check, list):
        return (
            _shapes(meta.check, f"{yml} kernel_scientist.check", _generator_signature(yml.parent / "reference.py"))
            or tests[:1]
        )
    if meta.check == "scaled-gemm":
        if not all(t.is_mnk() for t in tests):
            raise TaskError(f"{yml}: kernel_scientist.check = 'scaled-gemm' needs tests of exactly m, n, k (and seed)")
        return derive_check_shapes(tests)
    order = sorted(range(len(tests)), key=lambda i: (tests[i].work(), i))
    return [tests[i] for i in sorted(order[:_SMALLEST])]


def _scaled(t: Shape) -> tuple[Shape, frozenset[str]]:
    """A small shape with the same edge-case features as test ``t``, and those features."""
    tm, tn, tk = t.mnk()
    kb = -(-tk // 128)
    m = 96 if tm % 64 else 64
    n = 64 if tn == 64 else (192 if tn % 128 == 64 else 128)
    k = 128 if kb == 1 else 256
    feats = {"m%64" if tm % 64 else "m64", "n%128==64" if tn % 128 == 64 else "n%128==0"}
    feats.add("one k block" if kb == 1 else "several k blocks")
    if n > 128:
        feats.add("several b_scale rows")
    return Shape(m, n, k, t.seed), frozenset(feats)


def derive_check_shapes(tests: list[Shape]) -> list[Shape]:
    """Greedy cover of the tests' edge-case features by the cheapest scaled shapes.

    The interpreter costs roughly m*n*k; each step takes the shape adding the most uncovered
    features per square root of work (the root favours one shape covering three features over two
    shapes covering them piecemeal). Ties go to test order, so the result is deterministic.
    """
    candidates: dict[tuple[int, int, int], tuple[Shape, frozenset[str]]] = {}
    for t in tests:
        s, f = _scaled(t)
        candidates.setdefault(s.mnk(), (s, f))
    wanted = frozenset().union(*(f for _, f in candidates.values()))
    chosen: list[Shape] = []
    covered: set[str] = set()
    while covered != wanted:
        best = max(candidates.values(), key=lambda c: len(c[1] - covered) / c[0].work() ** 0.5)
        chosen.append(best[0])
        covered |= best[1]
    return chosen


def geomean(values: list[float]) -> float:
    """The task's score over its ranked shapes: the geometric mean of the per-shape times."""
    return math.exp(sum(math.log(v) for v in values) / len(values))


def mix_seed(seed: int, secret_seed: int) -> int:
    """A test seed combined with the secret seed (as the public harness did), stable across runs."""
    digest = hashlib.blake2b(f"{seed}:{secret_seed}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


def check_failure(ref: ModuleType, data: object, output: object) -> str | None:
    """The folder's own ``check_implementation`` on ``output``: None when it passes, else its
    message in one line. Both conventions of the format: ``(ok, message)``, or a message that is
    empty when the output passes (what the public harness's wrapper accepts)."""
    got = ref.check_implementation(data, output)
    if isinstance(got, tuple):
        ok, msg = (bool(got[0]), got[1] if len(got) > 1 else "")
    else:
        ok, msg = not bool(got), got
    if ok:
        return None
    if isinstance(msg, (list, tuple)):
        msg = " ".join(str(m) for m in msg)
    return " ".join(str(msg).split())[:400] or "check_implementation reported a failure without a message"


def tensor_bytes(t: torch.Tensor) -> torch.Tensor:
    """A tensor's bytes in logical order, for bit-exact comparison. Copied into a fresh 1-D
    tensor: ``contiguous()`` keeps the odd stride of a size-1 dimension (a row of
    ``(x @ w)[:, 0]``), which a byte view refuses."""
    import torch

    flat = torch.empty(t.numel(), dtype=t.dtype, device=t.device)
    return flat.copy_(t.reshape(-1)).view(torch.uint8)
