"""Building an evaluator backend for the CLI and the runner, with the user's errors in one line.

The local backend refuses to start on a machine without a GPU (its constructor raises
``RuntimeError`` with the reason); that is the user's choice of backend, not a bug, so it becomes a
``BackendUnavailable`` naming the setting that asked for it (``--backend local`` or
``evaluator.backend = "local"``) before any file is created.
"""

from __future__ import annotations


class BackendUnavailable(Exception):
    """The chosen backend cannot run on this machine; the message says which setting and why."""


def make_backend(kind: str, task, *, setting: str, instead: str, timeout_s: float, device: str = "mi300x",
                 noise: float = 0.0, max_calls: int = 100, shape_budget_s: float = 5.0,
                 own_kernel: bool = False, harness_device: str = "cuda", ray_address: str = "",
                 in_flight: int = 1):
    """A ``SimulatedBackend``, ``LocalBackend`` or ``RayBackend`` for ``task``. ``setting`` names
    where the choice was made and ``instead`` what to use on a machine without a GPU, for the error
    message."""
    from evaluator import ClusterError, LocalBackend, RayBackend, SimulatedBackend

    if kind == "ray":  # the cluster's own checks (reachable, big enough for in_flight) in one line
        try:
            return RayBackend(task, address=ray_address, in_flight=in_flight, timeout_s=timeout_s,
                              max_calls=max_calls, shape_budget_s=shape_budget_s, device=harness_device,
                              own_kernel=own_kernel)
        except ClusterError as exc:
            raise BackendUnavailable(f"{setting}: {exc}") from None
    if kind != "local":
        return SimulatedBackend(task, device=device, noise=noise, timeout_s=timeout_s, own_kernel=own_kernel)
    try:
        return LocalBackend(task, timeout_s=timeout_s, max_calls=max_calls, shape_budget_s=shape_budget_s,
                            device=harness_device, own_kernel=own_kernel)
    except RuntimeError as exc:  # no GPU visible: the constructor's reason, then our own advice
        reason = str(exc).split(";")[0]
        raise BackendUnavailable(f"{setting}: {reason}; use {instead} on this machine") from None
