"""The backends: the one path from a campaign to a verdict and a time.

``Backend`` (``_protocol``) is the seam the agents, the runner and the CLI see, and ``make_backend``
the one place a backend is built from a scenario's ``[evaluator]`` table. Three fit it:
``SimulatedBackend`` (correctness for real under Triton's CPU interpreter, time from the model,
virtual time), ``LocalBackend`` (this machine's GPUs, a sandboxed harness process per candidate) and
``RayBackend`` (the local backend's harness as a Ray task on any GPU of a cluster).
"""

from kernel_scientist.evaluator.backends._local import LocalBackend
from kernel_scientist.evaluator.backends._protocol import (
    Backend,
    BackendUnavailable,
    Profiles,
    StartsInBackground,
    make_backend,
)
from kernel_scientist.evaluator.backends._ray import ClusterError, ClusterLost, RayBackend, join_cluster
from kernel_scientist.evaluator.backends._simulated import SimulatedBackend

__all__ = [
    "Backend",
    "BackendUnavailable",
    "ClusterError",
    "ClusterLost",
    "LocalBackend",
    "RayBackend",
    "SimulatedBackend",
    "Profiles",
    "StartsInBackground",
    "join_cluster",
    "make_backend",
]
