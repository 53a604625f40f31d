"""Where candidate code runs: the fork server on the CPU and the GPU harness, both out of the
campaign's reach.

Two entry points run as their own processes and are not imported here: ``_server`` (the preloaded
fork server of the simulated backend; ``_child`` is what each forked candidate does) and
``_gpu_harness`` (one candidate on one GPU, a fresh process each). Around them: ``_forkserver`` (the
campaign's side of the fork server), ``_framing`` (frames over pipes with wall-clock deadlines),
``_lifetime`` (no candidate outlives its parent), ``_rundir`` (a folder's run directory and
inputs), ``_values`` (inputs and outputs across the boundary), ``_capture`` (launch capture),
``_calls`` (one checked call and a shape's timed calls), ``_prepare`` (compiling ahead),
``_interpreter`` (work Triton's CPU interpreter repeats, removed once), ``_inductor`` (what
Inductor writes for a PyTorch seed, in a process of its own) and ``_hooks`` (the dispatch
modes and patched launch paths they set for a block). The face below is what the backends, the
benchmark scripts and ``sweep --ray``'s remote campaigns (``die_with_parent``) use.
"""

from kernel_scientist.evaluator._wire import GpuRequest
from kernel_scientist.evaluator.sandbox._calls import time_shape, time_shape_eval_py
from kernel_scientist.evaluator.sandbox._capture import capture_launches
from kernel_scientist.evaluator.sandbox._child import meta_inputs, recheck_index
from kernel_scientist.evaluator.sandbox._forkserver import (
    ForkServer,
    JobOutcome,
    SandboxError,
    last_output,
    scrubbed_env,
)
from kernel_scientist.evaluator.sandbox._inductor import InductorCapture, InductorRequest, run_capture
from kernel_scientist.evaluator.sandbox._lifetime import die_with_parent
from kernel_scientist.evaluator.sandbox._rundir import (
    generate_input,
    import_reference,
    import_submission,
    isolate_candidate,
)
from kernel_scientist.evaluator.sandbox._values import decode_output, prefill_output

__all__ = [
    "ForkServer",
    "GpuRequest",
    "InductorCapture",
    "InductorRequest",
    "JobOutcome",
    "SandboxError",
    "capture_launches",
    "decode_output",
    "die_with_parent",
    "generate_input",
    "import_reference",
    "import_submission",
    "isolate_candidate",
    "last_output",
    "meta_inputs",
    "prefill_output",
    "recheck_index",
    "run_capture",
    "scrubbed_env",
    "time_shape",
    "time_shape_eval_py",
]
