"""The evaluator's parts that the helper programs in scripts/ build on (benchmarks against anchors,
the host-path profiler, the model's calibration): the run directory, the GPU harness's timing loop
and the model's per-launch times. Public so that the scripts need no private module; the agents
use the package's own surface (``evaluator.__init__``) instead.
"""

from kernel_scientist.evaluator._devices import l2_flush_bytes
from kernel_scientist.evaluator._gpu_harness import time_shape, time_shape_eval_py
from kernel_scientist.evaluator._model import PARAMS, ModelInfeasible, Params, launch_time_us, torch_op_time_us
from kernel_scientist.evaluator._rundir import generate_input, import_reference, import_submission, isolate_candidate
from kernel_scientist.evaluator._values import prefill_output
from kernel_scientist.evaluator._wire import GpuRequest

__all__ = [
    "PARAMS",
    "GpuRequest",
    "ModelInfeasible",
    "Params",
    "generate_input",
    "import_reference",
    "import_submission",
    "isolate_candidate",
    "l2_flush_bytes",
    "launch_time_us",
    "prefill_output",
    "time_shape",
    "time_shape_eval_py",
    "torch_op_time_us",
]
