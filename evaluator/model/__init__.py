"""The timing model and the devices it describes: what the simulated backend predicts a launch costs.

``_devices`` holds each GPU's public figures (``DEVICES``, ``spec_for`` by a driver's name) and the
speed of light of a GEMM shape; ``_timing`` the analytic model of Triton launches (``MODEL_VERSION``,
the fitted ``PARAMS``, ``host_floor_us``, ``what_it_sees`` in a kernel author's words; ``docs/model.md`` has its fit and held-out fidelity).
Nothing here runs code: the model prices the launches the sandbox captured.
"""

from kernel_scientist.evaluator.model._devices import DEVICES, DeviceSpec, l2_flush_bytes, spec_for, speed_of_light_us
from kernel_scientist.evaluator.model._timing import (
    MODEL_VERSION,
    PARAMS,
    ModelInfeasible,
    ModelUnsupported,
    Params,
    capture_time_us,
    host_floor_us,
    is_vector_gemm,
    launch_time_us,
    launches_time_us,
    report_host_floor_us,
    torch_op_time_us,
    what_it_sees,
)

__all__ = [
    "DEVICES",
    "MODEL_VERSION",
    "PARAMS",
    "DeviceSpec",
    "ModelInfeasible",
    "ModelUnsupported",
    "Params",
    "capture_time_us",
    "host_floor_us",
    "is_vector_gemm",
    "l2_flush_bytes",
    "launch_time_us",
    "launches_time_us",
    "report_host_floor_us",
    "spec_for",
    "speed_of_light_us",
    "torch_op_time_us",
    "what_it_sees",
]
