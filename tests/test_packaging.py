"""Installing kernel-scientist beside another distribution that owns a top-level ``agents`` package
(the OpenAI Agents SDK's import name) leaves both importable: ours installs one top-level name,
``kernel_scientist`` (docs/decisions.md, "Package layout"). Offline: the stand-in and our wheel are
built here with the environment's setuptools, and pip installs them from files."""

import subprocess
import sys
import zipfile

from _support import ROOT

STAND_IN = """[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "stand-in-agents-sdk"
version = "1.0"

[tool.setuptools]
packages = ["agents"]
"""


def _pip(*args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_an_sdk_that_owns_agents_and_kernel_scientist_install_side_by_side(tmp_path):
    sdk = tmp_path / "stand-in"
    (sdk / "agents").mkdir(parents=True)
    (sdk / "agents" / "__init__.py").write_text('WHO = "the stand-in SDK"\n')
    (sdk / "pyproject.toml").write_text(STAND_IN)
    wheels = tmp_path / "wheels"
    for project in (sdk, ROOT):
        _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir", str(wheels), str(project))
    ours = next(wheels.glob("kernel_scientist-*.whl"))
    tops = {name.split("/")[0] for name in zipfile.ZipFile(ours).namelist() if ".dist-info/" not in name}
    assert tops == {"kernel_scientist"}, f"our wheel installs more top-level names: {sorted(tops)}"
    names = zipfile.ZipFile(ours).namelist()
    for data in (
        "kernel_scientist/evaluator/tasks/amd_fp8_mm/task.yml",
        "kernel_scientist/knowledge/docs/",
        "kernel_scientist/agents/llm/prompts/",
    ):  # what the code reads beside itself
        assert any(name.startswith(data) for name in names), f"our wheel lacks {data}"

    site = tmp_path / "site"
    _pip("install", "--no-deps", "--no-index", "--target", str(site), *map(str, wheels.glob("*.whl")))
    probe = (
        "import agents, kernel_scientist.agents as ours, kernel_scientist.evaluator as ev\n"
        "print(agents.WHO)\n"
        "print(ours.Critic.__module__, ours.__file__)\n"
        "print(len(ev.load_task(ev.__path__[0] + '/tasks/amd_fp8_mm').benchmarks))\n"
        "from kernel_scientist.commands.evaluate import DEFAULT_TASK\n"
        "print(DEFAULT_TASK.is_dir(), DEFAULT_TASK)\n"
    )
    # A fresh interpreter outside the checkout, the two installations first on its path.
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    who, critic, shapes, default_task = proc.stdout.splitlines()
    assert who == "the stand-in SDK"
    assert critic.startswith("kernel_scientist.agents.critic ") and critic.endswith(
        str(site / "kernel_scientist" / "agents" / "__init__.py")
    )
    assert int(shapes) > 0  # the task folders came with the package
    # evaluate's default problem folder is the installed one, not a path beside the checkout
    assert default_task == f"True {site / 'kernel_scientist' / 'evaluator' / 'tasks' / 'amd_fp8_mm'}"
