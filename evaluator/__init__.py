"""The evaluator: task folders, static rules, the sandbox, and the simulated backend.

Public surface (the agents' only way in): ``load_task``/``Task``/``TaskMeta``/``TaskError``,
``static_findings``/``RuleFinding``, the ``Backend`` protocol with ``make_backend`` (from a
scenario's ``[evaluator]`` table) and ``BackendUnavailable``, ``SimulatedBackend``/``LocalBackend``/
``RayBackend`` (with ``join_cluster``, ``ClusterError``/``ClusterLost``),
``speed_of_light_us``/``DEVICES``/``DeviceSpec``/``spec_for`` (a GPU by its driver's name),
``Launch`` (what launch capture records) and ``MODEL_VERSION``. Everything else lives in private
modules. The evaluator depends on ``blackboard.records`` only, for its result Structs.
"""

from kernel_scientist.evaluator._backend import Backend, BackendUnavailable, make_backend
from kernel_scientist.evaluator._devices import DEVICES, DeviceSpec, spec_for, speed_of_light_us
from kernel_scientist.evaluator._local import LocalBackend
from kernel_scientist.evaluator._model import MODEL_VERSION
from kernel_scientist.evaluator._ray import ClusterError, ClusterLost, RayBackend, join_cluster
from kernel_scientist.evaluator._rules import RuleFinding, static_findings
from kernel_scientist.evaluator._sandbox import SandboxError
from kernel_scientist.evaluator._simulated import SimulatedBackend
from kernel_scientist.evaluator._task import Task, TaskError, TaskMeta, geomean, load_task
from kernel_scientist.evaluator._wire import Launch, TensorArg, TorchOp

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
    "Task",
    "TaskError",
    "TaskMeta",
    "TensorArg",
    "TorchOp",
    "geomean",
    "join_cluster",
    "load_task",
    "make_backend",
    "spec_for",
    "speed_of_light_us",
    "static_findings",
]
