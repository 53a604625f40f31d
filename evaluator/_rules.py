"""Static rules: patterns a submission may not contain, checked before anything runs.

Each rule answers one attack from docs/evaluator-attacks.md. The check is an AST walk with import
aliases resolved (``import os as o; o.environ`` is still ``os.environ``), not a text search, so
comments and strings do not trip it and ordinary Triton code (``tl.dot``, ``.contiguous()``,
``torch.empty``, ``triton.cdiv``) passes. Static rules are a first gate, not a proof: the sandbox,
the out-of-process verdict and the runtime heavy-op check stand behind them.

Two kinds of rule. Most protect the evaluator itself (introspection, file writes, patched timers,
forged channels, native code, the harness's modules): they always apply, on every task. The rules
in ``POLICY_RULES`` say instead what the kernel may *call* (a torch matrix product): a leaderboard
accepts a torch solution (it is only slow), so ``evaluate`` leaves them off by default, and a
campaign whose goal is a custom kernel turns them on (``own_kernel``).
"""

from __future__ import annotations

import ast
import functools
from typing import Literal

import msgspec

Severity = Literal["reject", "warn"]


class RuleFinding(msgspec.Struct, frozen=True):
    """One static rule that matched: ``severity`` "reject" binds (the candidate is not evaluated),
    "warn" is advice for the reviewer."""

    rule: str
    line: int
    detail: str
    severity: Severity

    @property
    def rejects(self) -> bool:
        return self.severity == "reject"

    def text(self) -> str:
        """The one line a reviewer (and a prompt) reads: "reject: rule (line n): detail"."""
        return f"{self.severity}: {self.rule} (line {self.line}): {self.detail}"


# rule -> (severity, dotted prefixes that trigger it, why/fix)
_NAME_RULES: dict[str, tuple[Severity, tuple[str, ...], str]] = {
    "environment": (
        "reject",
        ("os.environ", "os.getenv", "os.environb", "os.putenv", "os.unsetenv"),
        "a submission may not read or change the environment (secrets live there)",
    ),
    "process_control": (
        "reject",
        (
            "subprocess",
            "os.system",
            "os.popen",
            "os.fork",
            "os.forkpty",
            "os.exec",
            "os.spawn",
            "os.posix_spawn",
            "os.kill",
            "os.killpg",
            "os._exit",
            "os.setsid",
            "pty",
            "multiprocessing",
            "signal",
            # the same calls without the os module's name, and their helpers
            "posix",
            "nt",
            "_posixsubprocess",
            "torch.multiprocessing",
            "resource",
            "os.getppid",
            "os.register_at_fork",
        ),
        "a submission may not start, signal or end processes",
    ),
    "native_code": (
        "reject",
        ("ctypes", "cffi", "torch.ops.load_library"),
        "raw native code escapes every check; write Triton or use cpp_extension (warned)",
    ),
    "network": (
        "reject",
        ("socket", "urllib", "http", "requests", "httpx", "ssl"),
        "a submission may not open network connections",
    ),
    "harness_import": (
        "reject",
        ("reference", "utils", "eval", "evaluator", "blackboard", "agents", "kernel_scientist", "knowledge"),
        "the reference and the harness are not the submission's to import; write the kernel",
    ),
    "introspection": (
        "reject",
        (
            "sys.modules",
            "sys._getframe",
            "gc",
            "inspect",
            "builtins",
            "importlib",
            "sys.settrace",
            "sys.setprofile",
            "traceback",
        ),
        "reaching into the interpreter's modules or frames can find the checker",
    ),
    "threads_streams": (
        "reject",
        (
            "threading",
            "_thread",
            "concurrent",
            "asyncio",
            "torch.cuda.Stream",
            "torch.cuda.stream",
            "torch.cuda.set_stream",
            "torch.Stream",
        ),
        "work on another thread or stream escapes the timed window; launch on the default stream",
    ),
    "heavy_op": (
        "reject",
        (
            "torch.matmul",
            "torch.mm",
            "torch.bmm",
            "torch.addmm",
            "torch.einsum",
            "torch._scaled_mm",
            "torch.nn.functional.linear",
            "torch.tensordot",
            "torch.baddbmm",
            "torch.linalg",
            "torch.inner",
            "torch.dot",
        ),
        "the task's matrix product must be computed by the submission's own kernel",
    ),
    "file_write": (
        "reject",
        (
            "shutil",
            "os.remove",
            "os.unlink",
            "os.rename",
            "os.replace",
            "os.makedirs",
            "os.mkdir",
            "os.rmdir",
            "os.chmod",
            "tempfile",
            "pathlib",
            # raw descriptors can forge the sandbox's result file or write to its pipes
            "os.open",
            "os.write",
            "os.pwrite",
            "os.writev",
            "os.symlink",
            "os.link",
            "os.truncate",
            "os.ftruncate",
            "os.dup",
            "os.dup2",
            "os.chdir",
            "os.fchmod",
            "os.chown",
            "os.mkfifo",
            "os.mknod",
            "os.removedirs",
            "os.renames",
            "io",
            "torch.save",
            "numpy.save",
            "numpy.savez",
            "numpy.savetxt",
        ),
        "a submission may not write files (it could hijack imports or the result channel)",
    ),
    "file_read": (
        "reject",
        (
            "numpy.load",
            "numpy.fromfile",
            "numpy.loadtxt",
            "numpy.genfromtxt",
            "numpy.memmap",
            "torch.load",
            "os.read",
            "os.listdir",
            "os.scandir",
            "os.walk",
            "glob",
        ),
        "a submission may not read files: /proc/<pid>/environ of the campaign process holds its keys",
    ),
    "cpp_extension": (
        "warn",
        ("torch.utils.cpp_extension",),
        "compiled extensions cannot run on the simulated backend's CPU",
    ),
}
_HEAVY_METHODS = {"matmul", "mm", "bmm", "addmm", "einsum", "_scaled_mm", "linear", "tensordot", "baddbmm"}
_DYNAMIC_CALLS = {"eval", "exec", "compile", "__import__", "delattr", "globals", "vars", "locals", "breakpoint"}
_FRAME_ATTRS = {
    "tb_frame",
    "f_back",
    "f_globals",
    "f_locals",
    "gi_frame",
    "cr_frame",
    "__globals__",
    "__subclasses__",
    "__builtins__",
}
_TIMER_ROOTS = (
    "time",
    "torch.cuda",
    "torch.cuda.Event",
    "triton.testing",
    "torch.synchronize",
    "torch.cuda.synchronize",
    "torch.cuda.Event.elapsed_time",
)
# device_probe: the simulated backend records a kernel's launches on the meta device, so a kernel may
# not ask whether it runs there; both ways of asking are refused with the same advice.
_META_ATTRIBUTE = (
    "uses .is_meta: a kernel that behaves differently when only its launches "
    "are recorded is timed on work it does not do; launch the same work on every device"
)
_META_STRING = (
    "the string 'meta': a kernel may not test for the meta device the "
    "simulated backend records launches on; launch the same work on every device"
)


class _Walker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.findings: list[RuleFinding] = []
        self.launch_addresses: set[int] = set()  # ids of .data_ptr nodes written into an argument list

    def add(self, rule: str, node: ast.AST, detail: str, severity: Severity = "reject") -> None:
        self.findings.append(RuleFinding(rule=rule, line=getattr(node, "lineno", 0), detail=detail, severity=severity))

    def dotted(self, node: ast.AST) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def check_name(self, name: str, node: ast.AST) -> None:
        for rule, (severity, prefixes, why) in _NAME_RULES.items():
            for p in prefixes:
                if name == p or name.startswith(p + "."):
                    self.add(rule, node, f"uses {name}: {why}", severity)
                    return

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.aliases[(a.asname or a.name).split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            self.check_name(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = "." * node.level + (node.module or "")
        for a in node.names:
            full = f"{mod}.{a.name}" if mod else a.name
            self.aliases[a.asname or a.name] = full
            if node.level:
                self.add("harness_import", node, f"relative import {full}: a submission is a single file")
            else:
                self.check_name(full, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "is_meta":
            self.add("device_probe", node, _META_ATTRIBUTE)
        if node.attr in _FRAME_ATTRS:
            self.add("introspection", node, f"uses .{node.attr}: frames and globals reach the harness's state")
        if node.attr in ("data_ptr", "untyped_storage", "_cdata") and id(node) not in self.launch_addresses:
            self.add(
                "pointer_cache",
                node,
                f"uses .{node.attr}: results may not be keyed on tensor addresses; pass tensors to the kernel "
                "directly (or write the address straight into a launch's argument list: args[i] = t.data_ptr())",
            )
        name = self.dotted(node)
        if name and "." in name:
            self.check_name(name, node)
            return  # the chain is judged as a whole
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value == "meta":
            self.add("device_probe", node, _META_STRING)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases:
            self.check_name(self.aliases[node.id], node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Name):
            if f.id == "id":
                self.add("pointer_cache", node, "calls id(): results may not be keyed on object identity")
            elif f.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2:
                # getattr(torch, "float8_e4m3fnuz", None) is ordinary; a computed name is not.
                attr = node.args[1]
                if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                    self.add("dynamic_code", node, f"{f.id}() with a computed name hides what is accessed")
                else:
                    base = self.dotted(node.args[0])
                    if base:
                        self.check_name(f"{base}.{attr.value}", node)
                        if f.id == "setattr":
                            self._patched(ast.Attribute(value=node.args[0], attr=attr.value, ctx=ast.Store()), node)
            elif f.id in _DYNAMIC_CALLS:
                self.add("dynamic_code", node, f"calls {f.id}(): dynamic code and attribute access hide what runs")
            elif f.id == "open":
                mode = (
                    node.args[1]
                    if len(node.args) > 1
                    else next((k.value for k in node.keywords if k.arg == "mode"), None)
                )
                if mode is None or (
                    isinstance(mode, ast.Constant)
                    and isinstance(mode.value, str)
                    and set(mode.value) <= {"r", "b", "t"}
                ):
                    self.add(
                        "file_read",
                        node,
                        "open() for reading: a submission is self-contained, and "
                        "/proc/<pid>/environ of the campaign process holds its keys",
                    )
                else:
                    self.add(
                        "file_write",
                        node,
                        "open() for writing (or with a computed mode): submissions may not write files",
                    )
        elif isinstance(f, ast.Attribute):
            if f.attr in _HEAVY_METHODS and not (self.dotted(f) or "").startswith(("tl.", "triton.")):
                self.add(
                    "heavy_op",
                    node,
                    f".{f.attr}(): the task's matrix product must be computed by the submission's own kernel",
                )
            if f.attr in ("write_text", "write_bytes", "mkdir", "touch", "unlink", "tofile"):
                self.add("file_write", node, f".{f.attr}(): submissions may not write files")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.add(
                "heavy_op",
                node,
                "the @ operator: the task's matrix product must be computed by the submission's own kernel",
            )
        self.generic_visit(node)

    def _patched(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            name = self.dotted(target) or ""
            if _stricter_backend_flag(name, node):
                return
            if name.startswith(_TIMER_ROOTS) or target.attr in ("elapsed_time", "synchronize", "perf_counter", "time"):
                self.add(
                    "timer_patch", node, f"assigns {name or target.attr}: timers and synchronisation may not be patched"
                )
            elif name.startswith(("torch.", "triton.", "os.", "sys.", "builtins.")):
                self.add("monkeypatch", node, f"assigns {name}: submissions may not patch library modules")

    def visit_Assign(self, node: ast.Assign) -> None:
        # ``args[i] = t.data_ptr()``: an address written into a list, as a launch replay fills a
        # compiled launcher's arguments (an integer skips the launcher's per-tensor driver call).
        # Only that whole-statement form is let through; an address as a name, a key, a lookup or
        # a call's argument is still refused. A screen, not the guarantee: a result cached on any
        # key fails the re-check of every timed call, whose inputs are new.
        value = node.value
        if (
            all(isinstance(t, ast.Subscript) for t in node.targets)
            and isinstance(value, ast.Call)
            and not value.args
            and not value.keywords
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "data_ptr"
        ):
            self.launch_addresses.add(id(value.func))
        for t in node.targets:
            self._patched(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._patched(node.target, node)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.add(
            "global_state",
            node,
            f"global {', '.join(node.names)}: state kept across calls can cache "
            "results; keep it only for compiled configs",
            "warn",
        )


# The rules the walker applies by itself (not by a name's prefix), in a writer's words: with
# _NAME_RULES, what rules_text tells a kernel's author before it writes.
_WALKER_RULES: dict[str, tuple[Severity, str]] = {
    "device_probe": (
        "reject",
        "a kernel may not test for the meta device (.is_meta, the string 'meta'): launch the same work on every device",
    ),
    "pointer_cache": (
        "reject",
        "results may not be keyed on tensor addresses or object identity (.data_ptr(), id()), except an "
        "address written straight into a launch's argument list",
    ),
    "dynamic_code": ("reject", "no eval/exec/compile/__import__, and getattr/setattr only with a literal name"),
    "timer_patch": ("reject", "timers and synchronisation may not be replaced"),
    "monkeypatch": ("reject", "torch, triton, os, sys and builtins may not be patched"),
    "global_state": ("warn", "state kept across calls (global) only for compiled configs and launchers, never results"),
}


def rules_text(*, own_kernel: bool = True) -> str:
    """Every static rule as one line ("- rule: why"), rejecting ones first: what a kernel's author
    should know before writing (``static_findings`` applies the same set)."""
    rules = {name: (sev, why) for name, (sev, _prefixes, why) in _NAME_RULES.items()} | _WALKER_RULES
    lines = [
        f"- {name}{' (advice only)' if sev == 'warn' else ''}: {why}"
        for name, (sev, why) in sorted(rules.items(), key=lambda kv: (kv[1][0] == "warn", kv[0]))
        if own_kernel or name not in POLICY_RULES
    ]
    return "\n".join(lines)


POLICY_RULES = frozenset({"heavy_op"})  # what the kernel may call: on only with own_kernel


def _stricter_backend_flag(name: str, node: ast.AST) -> bool:
    """``torch.backends.cudnn.allow_tf32 = False``, ``...deterministic = True``, ``...benchmark =
    False``: flags that only make torch's own arithmetic more precise or repeatable (a public
    folder's seed sets them). The other way round could lower the precision of a reference that
    runs in the same process, so only the strict value passes."""
    value = getattr(node, "value", None)
    if not name.startswith("torch.backends.") or not isinstance(value, ast.Constant):
        return False
    flag = name.rsplit(".", 1)[-1]
    strict = True if flag == "deterministic" else (False if flag == "benchmark" or flag.startswith("allow_") else None)
    return strict is not None and value.value is strict


def static_findings(source: str, *, own_kernel: bool = True) -> list[RuleFinding]:
    """All rule findings for a submission's source, in line order; the policy rules only with
    ``own_kernel``. Unparseable source gives none (the sandbox reports the syntax error as a
    compile error, with its line)."""
    return [f for f in _findings(source) if own_kernel or f.rule not in POLICY_RULES]


def rule_verdict(source: str, *, own_kernel: bool = True) -> str | None:
    """The reason a submission is rejected before it runs ("rule X (line N): detail"), or None."""
    rejects = [f for f in static_findings(source, own_kernel=own_kernel) if f.rejects]
    if not rejects:
        return None
    f = rejects[0]
    more = f" (+{len(rejects) - 1} more)" if len(rejects) > 1 else ""
    return f"rule {f.rule} (line {f.line}): {f.detail}{more}"


@functools.lru_cache(maxsize=512)  # the critic, the pre-screen and the evaluation ask in turn
def _findings(source: str) -> tuple[RuleFinding, ...]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    walker = _Walker()
    walker.visit(tree)
    seen: set[tuple[str, int]] = set()
    out = []
    for f in sorted(walker.findings, key=lambda f: (f.line, f.rule)):
        if (f.rule, f.line) not in seen:
            seen.add((f.rule, f.line))
            out.append(f)
    return tuple(out)
