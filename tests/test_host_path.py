"""The host path that a leaderboard times: the launch cache's direct launcher, the descriptor
scratch that no call allocates, and a harness child that finds the package wherever it lives."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import types
from pathlib import Path

import torch
from kernel_scientist.evaluator.sandbox._forkserver import scrubbed_env
from kernel_scientist.knowledge.techniques.gemm import hopper, tuning

ROOT = Path(__file__).resolve().parents[1]


class _Compiled:
    """What Triton's JIT returns from a launch: a C launcher ``run``, the module's function and its
    packed metadata; ``[grid]`` gives the slower Python runner."""

    def __init__(self, calls):
        self.calls, self.function, self.packed_metadata = calls, "fn", ("packed",)

    def _init_handles(self):
        self.calls.append(("init",))

    def run(self, *argv):
        self.calls.append(("run", *argv))

    def __getitem__(self, grid):
        return lambda *args: self.calls.append(("runner", grid, *args))


class _Kernel:
    arg_names = ("x", "n", "BLOCK")

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        def jit(*args, **cfg):
            self.calls.append(("jit", grid, args, cfg))
            return _Compiled(self.calls)

        return jit


def _helpers(monkeypatch, cuda: bool):
    """The launch-cache helper as the technique writes it, with a stand-in for Triton's driver
    (stream 1234 + device). Triton itself is not imported: imported into this process before
    tests/test_task.py sets TRITON_INTERPRET, it leaves later interpreted kernels unable to call
    tl.cdiv (triton 3.8)."""
    active = types.SimpleNamespace(get_current_stream=lambda device: 1234 + device)
    fake_triton = types.SimpleNamespace(runtime=types.SimpleNamespace(driver=types.SimpleNamespace(active=active)))
    namespace = {"torch": torch, "triton": fake_triton}
    exec(tuning._LAUNCH_CACHE, namespace)  # the helper region exactly as the technique writes it
    if cuda:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return namespace


def test_later_launches_call_the_c_launcher_with_every_argument_in_order(monkeypatch):
    ns = _helpers(monkeypatch, cuda=True)
    kernel, x = _Kernel(), object()
    ns["launch_cached"](kernel, (7,), {"BLOCK": 64, "num_warps": 4}, x, 96)
    ns["launch_cached"](kernel, (7,), {"BLOCK": 64, "num_warps": 4}, x, 96)
    assert kernel.calls[0] == ("jit", (7,), (x, 96), {"BLOCK": 64, "num_warps": 4})
    # the JIT once; afterwards the launcher: grid padded to 3-D, the current stream, the function,
    # its metadata, no launch metadata or hooks, then the arguments and the constexprs
    assert kernel.calls[1:] == [("init",), ("run", 7, 1, 1, 1234, "fn", ("packed",), None, None, None, x, 96, 64)]


def test_a_new_integer_argument_takes_the_jit_again(monkeypatch):
    ns = _helpers(monkeypatch, cuda=True)
    kernel = _Kernel()
    for n in (96, 97, 96):
        ns["launch_cached"](kernel, (1,), {"BLOCK": 64}, None, n)
    assert [c[0] for c in kernel.calls] == ["jit", "init", "jit", "init", "run"]


def test_without_a_gpu_driver_the_runner_is_used(monkeypatch):
    ns = _helpers(monkeypatch, cuda=False)
    kernel = _Kernel()
    for _ in range(2):
        ns["launch_cached"](kernel, (2, 3), {"BLOCK": 32}, "x", 5)
    assert kernel.calls[-1] == ("runner", (2, 3, 1), "x", 5, 32)


def test_descriptor_scratch_is_allocated_once_per_size_and_stream():
    allocated = []

    def empty(size, **kwargs):
        allocated.append(size)
        return ("buffer", size, len(allocated))

    fake_torch = types.SimpleNamespace(empty=empty, int8="int8", cuda=types.SimpleNamespace(is_available=lambda: False))
    namespace = {"torch": fake_torch, "triton": types.SimpleNamespace(set_allocator=None)}
    exec(hopper._ALLOCATOR, namespace)
    scratch = namespace["_descriptor_scratch"]
    first = scratch(128, 64, 1)
    assert scratch(128, 64, 1) is first  # the next launch on that stream reuses it
    assert scratch(256, 64, 1) is not first and scratch(128, 64, 2) is not first
    assert allocated == [128, 256, 128]


def test_a_harness_child_finds_the_package_in_a_tree_of_links(tmp_path):
    """The GPU sessions run from a tree of links (scripts/installed_layout.py), with nothing
    installed; the harness child must import kernel_scientist.evaluator from that tree, not from
    the checkout the links resolve to (whose kernel_scientist/ lacks the subpackages)."""
    subprocess.run([sys.executable, str(ROOT / "scripts" / "installed_layout.py"), str(tmp_path)], check=True)
    # -S: no site hooks, so no editable-install finder; the dependencies through PYTHONPATH alone
    deps = os.pathsep.join(site.getsitepackages())
    code = (
        "import os, subprocess, sys\n"
        "from kernel_scientist.evaluator.sandbox._forkserver import scrubbed_env\n"
        "env = scrubbed_env()\n"
        "print(env['PYTHONPATH'].split(os.pathsep)[0])\n"
        "child = 'import kernel_scientist.evaluator.sandbox._gpu_harness as h; print(h.__name__)'\n"
        "sys.exit(subprocess.run([sys.executable, '-S', '-c', child], env=env, cwd=sys.argv[1]).returncode)\n"
    )
    run = subprocess.run(
        [sys.executable, "-S", "-c", code, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), deps))},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    first, name = run.stdout.split()
    assert Path(first) == tmp_path
    assert name == "kernel_scientist.evaluator.sandbox._gpu_harness"


def test_the_checkout_install_still_names_its_own_root():
    assert scrubbed_env()["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)


def _replay_namespace(monkeypatch):
    """The seed after launch_replay, reduced to its host helpers (launch cache with the recorder
    hooks, the replay wrapper), with a GPU driver stood in so that the direct launcher is used."""
    from kernel_scientist.knowledge._regions import parse
    from kernel_scientist.knowledge.techniques.host.replay import LaunchReplay

    seed = (ROOT / "evaluator" / "tasks" / "amd_fp8_mm" / "submission.py").read_text()
    source = LaunchReplay().apply(seed, {"replay": True})
    assert "@_ks_replayed\ndef custom_kernel(data):" in source
    lines, regions = source.splitlines(), parse(source)
    helpers = "\n".join(
        "\n".join(lines[regions[name].start : regions[name].end + 1]) for name in ("launch_cache", "launch_replay")
    )
    return _helpers(monkeypatch, cuda=True) | {"__name__": "replayed"}, helpers


def _compile(namespace, helpers, body):
    exec(helpers + "\n\n" + body, namespace)
    return namespace["custom_kernel"]


_BODY = """
BODY_RUNS = []


@_ks_replayed
def custom_kernel(data):
    a, b, c = data
    BODY_RUNS.append(1)
    {extra}
    launch_cached(KERNEL, (a.shape[0],), {{"BLOCK": 4}}, a, {b_arg}, c, a.shape[0])
    return c
"""


def _inputs(n=8):
    return (torch.randn(n), torch.randn(n), torch.zeros(n))


def test_launches_are_replayed_with_each_calls_tensors(monkeypatch):
    ns, helpers = _replay_namespace(monkeypatch)
    ns["KERNEL"] = kernel = _Kernel()
    kernel.arg_names = ("a", "b", "c", "n", "BLOCK")
    fn = _compile(ns, helpers, _BODY.format(extra="", b_arg="b"))
    calls = [_inputs() for _ in range(6)]
    assert fn(calls[0]) is calls[0][2]
    # the first call runs as written, then twice more on its own inputs, recorded: a leaderboard
    # times every call after the first, and those are all replayed
    assert len(ns["BODY_RUNS"]) == 3 and len(ns["_KS_PLANS"]) == 1
    for data in calls[1:]:
        assert fn(data) is data[2]
    assert len(ns["BODY_RUNS"]) == 3
    runs = [c for c in kernel.calls if c[0] == "run"]
    assert len(runs) == 7 and [c[0] for c in kernel.calls].count("jit") == 1
    assert all(run[10] is calls[0][0] for run in runs[:2])  # the recordings, on the first inputs
    for data, run in zip(calls[1:], runs[2:], strict=True):
        assert run[10] is data[0] and run[11] is data[1] and run[12] is data[2] and run[13:] == (8, 4)
    fn(_inputs(16))  # another signature: its first call runs as written and is recorded twice
    assert len(ns["BODY_RUNS"]) == 6


class _Interpreted(_Kernel):
    """A kernel as Triton's interpreter (or a launch capture on meta tensors) runs it: a launch
    returns no compiled kernel, so the launch cache keeps no launcher for it."""

    arg_names = ("a", "b", "c", "n", "BLOCK")

    def __getitem__(self, grid):
        def jit(*args, **cfg):
            self.calls.append(("jit", grid, args, cfg))

        return jit


def test_without_a_compiled_launcher_the_first_call_runs_once_like_every_later_one(monkeypatch):
    """No recording can replay a launch that has no compiled launcher, so none is made: the first
    call of a signature launches what every later call launches (the simulated evaluator checks
    that a call on meta tensors launches what the checked call did, rule meta_consistency)."""
    ns, helpers = _replay_namespace(monkeypatch)
    ns["KERNEL"] = kernel = _Interpreted()
    fn = _compile(ns, helpers, _BODY.format(extra="", b_arg="b"))
    calls = [_inputs() for _ in range(4)]
    for data in calls:
        assert fn(data) is data[2]
    assert len(ns["BODY_RUNS"]) == 4 and not ns["_KS_PLANS"]
    assert [c[0] for c in kernel.calls] == ["jit"] * 4
    assert [c[2][0] for c in kernel.calls] == [data[0] for data in calls]


_CHILD = """
import inspect, sys, types
import torch

sys.path.insert(0, {tests!r})
import test_host_path as t

torch.cuda.is_available = lambda: True
torch.cuda.current_device = lambda: 0
active = types.SimpleNamespace(get_current_stream=lambda device: 1234 + device)
ns = {{"torch": torch, "triton": types.SimpleNamespace(runtime=types.SimpleNamespace(
    driver=types.SimpleNamespace(active=active)))}}
ns["KERNEL"] = kernel = t._Kernel()
kernel.arg_names = ("a", "b", "c", "n", "BLOCK")
exec({helpers!r} + "\\n\\n" + t._BODY.format(extra={extra!r}, b_arg={b_arg!r}), ns)
for _ in range(6):
    ns["custom_kernel"](t._inputs())
print(len(ns["BODY_RUNS"]))
"""


def test_a_call_that_runs_a_torch_op_or_passes_a_fresh_tensor_is_never_replayed(monkeypatch):
    """In a child process: the recording's torch dispatch mode makes torch import Triton, which in
    this process must wait until tests/test_task.py has set TRITON_INTERPRET."""
    _, helpers = _replay_namespace(monkeypatch)
    for extra, b_arg in (("c.zero_()", "b"), ("", "b * 2")):
        code = _CHILD.format(tests=str(ROOT / "tests"), helpers=helpers, extra=extra, b_arg=b_arg)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stderr[-2000:]
        # the body ran on every call, and once more on the first (its refused recording)
        assert run.stdout.split() == ["7"], (extra, b_arg)


class _Launcher36:
    """A launcher object laid out as triton 3.6's CudaLauncher: its C ``launch`` function, the
    scratch sizes, and the Python ``__call__`` that a replay's C path skips."""

    global_scratch_size, global_scratch_align, profile_scratch_size, num_ctas = 64, 128, 0, 1
    launch_cooperative_grid, launch_pdl = False, False

    def __init__(self, calls):
        self.calls = calls

    def launch(self, *argv):
        self.calls.append(("c", *argv))

    def __call__(self, *argv):
        self.calls.append(("run", *argv))


class _Kernel36(_Kernel):
    arg_names = ("a", "b", "c", "n", "BLOCK")

    def __getitem__(self, grid):
        def jit(*args, **cfg):
            self.calls.append(("jit", grid, args, cfg))
            compiled = _Compiled(self.calls)
            compiled.run = _Launcher36(self.calls)
            return compiled

        return jit


def _with_allocator(ns, fresh: bool):
    """Triton's scratch allocator as triton 3.6 keeps it (a context variable's value), handing out
    one buffer per size and stream, or new memory on every request."""
    given = []

    def allocate(size, align, stream):
        if fresh or not given:
            given.append(("scratch", size, stream, len(given)))
        return given[-1]

    ns["triton"].runtime._allocation = types.SimpleNamespace(_allocator=types.SimpleNamespace(get=lambda: allocate))
    return given


def test_replayed_launches_call_the_c_function_with_the_scratch_and_stream_fixed(monkeypatch):
    ns, helpers = _replay_namespace(monkeypatch)
    given = _with_allocator(ns, fresh=False)
    current = [1234]  # the current stream, as torch would report it
    ns["triton"].runtime.driver.active.get_current_stream = lambda device: current[0]
    ns["KERNEL"] = kernel = _Kernel36()
    fn = _compile(ns, helpers, _BODY.format(extra="", b_arg="b"))
    calls = [_inputs() for _ in range(6)]
    for data in calls:
        assert fn(data) is data[2]
    assert len(ns["BODY_RUNS"]) == 3
    c_calls = [c for c in kernel.calls if c[0] == "c"]
    assert len(c_calls) == 5 and len(given) == 1  # one scratch buffer for every replayed launch
    for data, call in zip(calls[1:], c_calls, strict=True):
        # grid, stream 1234, function, no cooperative grid or PDL, the scratch, no profile scratch,
        # the packed metadata, no launch metadata or hooks, then the inputs and the constexprs
        assert call[:14] == ("c", 8, 1, 1, 1234, "fn", False, False, given[0], None, ("packed",), None, None, None)
        # the inputs as their addresses, read on this call
        assert call[14:17] == (data[0].data_ptr(), data[1].data_ptr(), data[2].data_ptr()) and call[17:] == (8, 4)
    # another current stream than the recorded one: the plan is dropped, every call runs as written
    current[0] = 99
    before = len(ns["BODY_RUNS"])
    fn(_inputs())
    fn(_inputs())
    assert len(ns["BODY_RUNS"]) == before + 2
    assert kernel.calls[-1][:5] == ("run", 8, 1, 1, 99)


_VIEW_CHILD = """
import sys, types
import torch

sys.path.insert(0, {tests!r})
import test_host_path as t

torch.cuda.is_available = lambda: True
torch.cuda.current_device = lambda: 0
active = types.SimpleNamespace(get_current_stream=lambda device: 1234)
ns = {{"torch": torch, "triton": types.SimpleNamespace(runtime=types.SimpleNamespace(
    driver=types.SimpleNamespace(active=active)))}}
t._with_allocator(ns, fresh=False)
ns["KERNEL"] = kernel = t._Kernel36()
exec({helpers!r} + "\\n\\n" + t._BODY.format(extra={extra!r}, b_arg="b"), ns)
calls = [(torch.randn(4, 2).T, torch.randn(8), torch.zeros(8)) for _ in range(5)]
for data in calls:
    assert ns["custom_kernel"](data) is data[2]
c_calls = [c for c in kernel.calls if c[0] == "c"]
for data, call in zip(calls[1:], c_calls):
    assert call[14:17] == (data[0].data_ptr(), data[1].data_ptr(), data[2].data_ptr()), call
print(len(ns["BODY_RUNS"]), len(c_calls))
"""


def test_an_inputs_dtype_view_is_replayed_as_that_input(monkeypatch):
    """The fp8 flavour reads e4m3fnuz inputs through a dtype view: the same bytes, so the replay
    passes the input's own address in its place. A view of another shape, or of another width,
    is not the input: those calls run as written every time. (In a child process, as above: an
    op under the recording's dispatch mode imports Triton.)"""
    _, helpers = _replay_namespace(monkeypatch)
    expect = {
        "a = a.view(torch.int32)": ["3", "4"],
        "a = a.T.reshape(-1)": ["6", "0"],  # a torch op: the first recording is refused
        "b = b.view(torch.int16)": ["7", "0"],  # a new tensor per run: the two recordings disagree
    }
    for extra, runs in expect.items():
        code = _VIEW_CHILD.format(tests=str(ROOT / "tests"), helpers=helpers, extra=extra)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.split() == runs, extra  # body runs, replayed C launches


def test_a_fixed_buffer_goes_to_the_c_function_as_its_address_and_the_plan_keeps_it(monkeypatch):
    ns, helpers = _replay_namespace(monkeypatch)
    _with_allocator(ns, fresh=False)
    ns["triton"].runtime.driver.active.get_current_stream = lambda device: 1234
    ns["KERNEL"] = kernel = _Kernel36()
    ns["BUF"] = buffer = torch.randn(8)  # a buffer the submission keeps between calls
    fn = _compile(ns, helpers, _BODY.format(extra="", b_arg="BUF"))
    calls = [_inputs() for _ in range(5)]
    for data in calls:
        assert fn(data) is data[2]
    c_calls = [c for c in kernel.calls if c[0] == "c"]
    assert len(c_calls) == 4
    for data, call in zip(calls[1:], c_calls, strict=True):
        assert call[14:17] == (data[0].data_ptr(), buffer.data_ptr(), data[2].data_ptr())
    del ns["BUF"]  # the submission lets go of it: the plan still holds it, so its address stays its own
    (plan,) = ns["_KS_PLANS"].values()
    assert any(kept is buffer for kept in plan[3])


def test_an_allocator_that_hands_out_new_memory_keeps_the_launchers_own_path(monkeypatch):
    ns, helpers = _replay_namespace(monkeypatch)
    _with_allocator(ns, fresh=True)
    ns["KERNEL"] = kernel = _Kernel36()
    fn = _compile(ns, helpers, _BODY.format(extra="", b_arg="b"))
    for _ in range(6):
        fn(_inputs())
    assert len(ns["BODY_RUNS"]) == 3  # still replayed, through the launcher object
    assert not [c for c in kernel.calls if c[0] == "c"]
    assert [c[0] for c in kernel.calls[-3:]] == ["run", "run", "run"]


def test_the_signature_tells_apart_what_a_launch_specialises_on():
    from kernel_scientist.knowledge.techniques.host.replay import REPLAY

    ns = {"torch": torch}
    start = REPLAY.index("def _ks_signature")
    exec(REPLAY[start : REPLAY.index("def _ks_c_launch")], ns)
    signature = ns["_ks_signature"]
    base = torch.zeros(64)
    same = signature((base[:32], 3))
    assert signature((torch.zeros(64)[:32], 3)) == same
    for other in ((base[1:33], 3), (base[:32].double(), 3), (base[:16], 3), (base[:32], 4), (base[:32], 3.0)):
        assert signature(other) != same, other
