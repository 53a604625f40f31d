"""What every stage of an LLM brain is told of the evaluator and the device (the system prompt, as
a campaign's LLM service builds it): simulated or measured, how a score is made, what is timed,
where the tensors live, the pre-screen, the toolchain, the simulated device's public figures, and
the one definition of uplift."""

from __future__ import annotations

from _support import SCENARIOS
from kernel_scientist.agents.llm import LLMService
from kernel_scientist.blackboard import Blackboard, load_scenario


def _system(tmp_path, *settings: str) -> str:
    scenario = load_scenario(
        SCENARIOS / "smoke.toml", ["agents.brain=openai-compatible", "llm.base_url=http://127.0.0.1:9/v1", *settings]
    )
    with Blackboard(tmp_path / "b.sqlite") as board:
        return LLMService(scenario, board, lambda: 0.0).system


def test_a_simulated_campaign_says_it_is_simulated_and_gives_the_devices_figures(tmp_path):
    import torch
    import triton

    text = _system(tmp_path, "evaluator.backend=simulated", "evaluator.device=h200")
    assert "SIMULATED, not on hardware" in text and "analytic model of the NVIDIA H200 SXM" in text
    assert "answer is_cuda as a GPU's would" in text and "torch.cuda is not available" in text
    assert f"torch {torch.__version__.split('+')[0]}, triton {triton.__version__}" in text
    assert "132 SMs" in text and "HBM 4.8 TB/s" in text and "227 KB of shared memory" in text
    assert "base's score over the new kernel's, minus 1" in text


def test_a_simulated_campaign_says_what_its_timing_model_reads_with_the_models_own_constants(tmp_path):
    from kernel_scientist.evaluator.model import DEVICES
    from kernel_scientist.evaluator.model._timing import params_for

    for device in ("h200", "mi300x"):
        (tmp_path / device).mkdir()
        text = _system(tmp_path / device, "evaluator.backend=simulated", f"evaluator.device={device}")
        p = params_for(DEVICES[device])
        assert f"over {p.hbm_eff:.0%} of HBM bandwidth" in text
        assert f"{p.host_launch_us:g} us per Triton launch and {p.host_torch_us:g} us per torch op" in text
        assert "cache and eviction hints and loop structure change no modelled time" in text
    (tmp_path / "gpu").mkdir()
    assert "What the timing model reads" not in _system(tmp_path / "gpu", "evaluator.backend=local")


def test_a_gpu_campaign_says_what_is_timed_and_names_no_device_it_does_not_know(tmp_path):
    text = _system(tmp_path, "evaluator.backend=local", "evaluator.device=mi300x")
    assert "on a real GPU" in text and "untimed warm-up call" in text and "L2 flush" in text
    assert "host work of a call" in text and "SIMULATED" not in text
    assert "MI300X" not in text.split("How a kernel is measured")[1]  # the local GPU is not known here
