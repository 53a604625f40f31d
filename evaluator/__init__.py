"""The evaluator: the only path from a candidate's source to a verdict and a time.

By role, each folder with a small public face:
- ``backends/``: the ``Backend`` seam, ``make_backend`` (from a scenario's ``[evaluator]`` table)
  and the three backends, simulated (CPU correctness, modelled time), local (this machine's GPUs)
  and Ray (GPUs of a cluster);
- ``sandbox/``: where candidate code runs (the fork server, the GPU harness, launch capture, the
  run directory, the timed-call protocol);
- ``model/``: the analytic timing model and the devices it describes;
- here: problem folders (``_task``: ``load_task``/``Task``/``TaskMeta``/``TaskError``), the static
  rules against known attacks (``_rules``: ``static_findings``), and the Structs that cross the
  sandbox boundary (``_wire``: ``Launch`` and what launch capture records).

Layers inside: ``model`` and ``sandbox`` never import ``backends``; ``model`` imports no
``sandbox`` (a test says so). The evaluator depends on ``blackboard`` only, for its records.
"""

from kernel_scientist.evaluator._rules import RuleFinding, rule_verdict, rules_text, static_findings
from kernel_scientist.evaluator._task import Task, TaskError, TaskMeta, geomean, load_task
from kernel_scientist.evaluator._wire import Launch, TensorArg, TorchOp
from kernel_scientist.evaluator.backends import (
    Backend,
    BackendUnavailable,
    ClusterError,
    ClusterLost,
    LocalBackend,
    Profiles,
    RayBackend,
    SimulatedBackend,
    StartsInBackground,
    join_cluster,
    make_backend,
)
from kernel_scientist.evaluator.model import DEVICES, MODEL_VERSION, DeviceSpec, spec_for, speed_of_light_us
from kernel_scientist.evaluator.sandbox import SandboxError

__all__ = [
    "Backend",
    "BackendUnavailable",
    "ClusterError",
    "ClusterLost",
    "DEVICES",
    "DeviceSpec",
    "Launch",
    "LocalBackend",
    "MODEL_VERSION",
    "RayBackend",
    "RuleFinding",
    "SandboxError",
    "SimulatedBackend",
    "Profiles",
    "StartsInBackground",
    "Task",
    "TaskError",
    "TaskMeta",
    "TensorArg",
    "TorchOp",
    "geomean",
    "join_cluster",
    "load_task",
    "make_backend",
    "rule_verdict",
    "rules_text",
    "spec_for",
    "speed_of_light_us",
    "static_findings",
]
