"""A PyTorch seed lowered by Inductor into a Triton submission the catalogue can tune.

The capture (``evaluator.sandbox``: Inductor's code generation, in a process of its own) and the
rewrite into a standalone submission (``knowledge.lowering``) meet here, where both layers are
visible; ``lower`` and a campaign whose seed has no Triton kernel use it, and a campaign whose seed
failed its check lowers the folder's reference instead (``reference_seed``).
"""

from __future__ import annotations

from kernel_scientist.blackboard.records import Shape
from kernel_scientist.evaluator import Task
from kernel_scientist.evaluator.sandbox import InductorCapture, InductorRequest, run_capture
from kernel_scientist.knowledge.lowering import (
    Lowered,
    LoweringError,
    Setting,
    is_pytorch_only,
    reference_submission,
    standalone,
)

__all__ = [
    "REFERENCE_NAME",
    "Lowered",
    "LoweringError",
    "capture_seed",
    "example_shape",
    "from_capture",
    "lower_reference",
    "lower_seed",
    "reference_seed",
]

REFERENCE_NAME = "reference.py"  # the seed name a lowering of the folder's reference goes by


def example_shape(task: Task) -> Shape:
    """The test traced: the largest whose sizes are all above 1 (Dynamo keeps a size of 1 as a
    constant, so an example with one would specialise the lowering), else the largest."""

    def sizes(shape: Shape) -> list[int]:
        return [v for k, v in shape.kwargs().items() if k != "seed" and type(v) is int]

    def volume(shape: Shape) -> int:
        n = 1
        for v in sizes(shape):
            n *= max(v, 1)
        return n

    general = [t for t in task.tests if all(v > 1 for v in sizes(t))]
    return max(general or task.tests, key=volume)


def capture_seed(
    task: Task, source: str, seed_name: str = "submission.py", timeout_s: float = 300.0
) -> InductorCapture:
    """What Inductor writes for ``source`` (a submission with no Triton kernel) on this machine's
    device, traced on ``example_shape`` with every size symbolic and checked against the task's
    other shapes; LoweringError with one line when it cannot give one module covering them all."""
    shape = example_shape(task)
    others = [s for s in task.tests + task.benchmarks if s != shape]
    request = InductorRequest(modules=task.modules, source=source, shape=shape, others=others, seed_name=seed_name)
    try:
        return run_capture(request, timeout_s=timeout_s)
    except ValueError as exc:
        raise LoweringError(str(exc)) from None


def from_capture(capture: InductorCapture) -> Lowered:
    """The standalone submission made of a capture, its provenance in the header."""
    target = {"cuda": "CUDA", "hip": "ROCm", "cpu": "Triton's CPU backend"}.get(capture.target, capture.target)
    provenance = (
        f"Lowered by Inductor from {capture.seed_name} (torch {capture.torch}, triton {capture.triton}, code for "
        f"{target}), traced on {capture.shape.label()} with every size symbolic."
    )
    settings = {k: [Setting(s.blocks, s.num_warps, s.num_stages) for s in v] for k, v in capture.settings.items()}
    return standalone(
        capture.code, capture.inputs, capture.params, capture.returns, settings, capture.helpers, provenance
    )


def lower_seed(task: Task, source: str, seed_name: str = "submission.py", timeout_s: float = 300.0) -> Lowered:
    """``capture_seed`` made a standalone submission (``from_capture``)."""
    return from_capture(capture_seed(task, source, seed_name, timeout_s))


def reference_seed(task: Task) -> str:
    """The folder's reference.py as a PyTorch submission to lower (``reference_submission``, its
    deterministic settings a no-op: Dynamo cannot trace them in one graph, and the lowering is
    checked against the real reference like any candidate); LoweringError with one line when it
    has no ref_kernel, needs more of the harness's utils, or has a kernel of its own."""
    source = reference_submission(task.reference_source, deterministic=False)
    if not is_pytorch_only(source):
        raise LoweringError(f"{REFERENCE_NAME} has a kernel of its own (Triton or an extension), not PyTorch to lower")
    return source


def lower_reference(task: Task, timeout_s: float = 300.0) -> Lowered:
    """The folder's reference lowered like a seed (``reference_seed``, ``lower_seed``)."""
    return lower_seed(task, reference_seed(task), REFERENCE_NAME, timeout_s)
