"""Static rules: each attack pattern is rejected with its line; honest kernels pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from evaluator_kernels import BETTER, SEEDLIKE
from kernel_scientist.evaluator import rules_text, static_findings

SEED = (Path(__file__).resolve().parents[1] / "evaluator" / "tasks" / "amd_fp8_mm" / "submission.py").read_text()

REJECTED = {
    "environment": "import os\nkey = os.environ['ANTHROPIC_API_KEY']\n",
    "environment-alias": "import os as o\nkey = o.getenv('KS_DB')\n",
    "environment-from": "from os import environ\nx = environ\n",
    "process_control": "import subprocess\nsubprocess.run(['ls'])\n",
    "process_control-system": "import os\nos.system('ls')\n",
    "native_code": "import ctypes\nctypes.string_at(0)\n",
    "network": "import socket\nsocket.socket()\n",
    "harness_import": "from reference import ref_kernel\n",
    "harness_import-utils": "import utils\n",
    "introspection-modules": "import sys\nref = sys.modules['reference']\n",
    "introspection-gc": "import gc\ngc.get_objects()\n",
    "introspection-frames": "import inspect\ninspect.currentframe()\n",
    "timer_patch-event": "import torch\ntorch.cuda.Event.elapsed_time = lambda self, other: 1.0\n",
    "timer_patch-time": "import time\ntime.perf_counter = lambda: 0.0\n",
    "timer_patch-sync": "import torch\nsetattr(torch.cuda, 'synchronize', lambda: None)\n",
    "heavy_op-matmul": "import torch\ndef custom_kernel(d):\n    return torch.matmul(d[0], d[1])\n",
    "heavy_op-at": "def custom_kernel(d):\n    return d[0] @ d[1]\n",
    "heavy_op-mm": "import torch\ntorch.mm(a, b)\n",
    "heavy_op-scaled": "import torch\ntorch._scaled_mm(a, b)\n",
    "heavy_op-linear": "import torch.nn.functional as F\nF.linear(a, b)\n",
    "heavy_op-method": "def custom_kernel(d):\n    return d[0].float().matmul(d[1].float().T)\n",
    "file_write": "open('torch.py', 'w').write('x')\n",
    "file_write-path": "from pathlib import Path\nPath('reference.py').write_text('')\n",
    "threads_streams": "import threading\nthreading.Thread(target=print).start()\n",
    "threads_streams-cuda": "import torch\ns = torch.cuda.Stream()\n",
    "pointer_cache": "cache = {}\ndef custom_kernel(d):\n    return cache.setdefault(d[0].data_ptr(), 0)\n",
    "pointer_cache-name": "def custom_kernel(d):\n    key = d[0].data_ptr()\n    return key\n",
    "pointer_cache-key": "cache = {}\ndef custom_kernel(d):\n    cache[d[0].data_ptr()] = d[4]\n",
    "pointer_cache-sum": "args = [0]\ndef custom_kernel(d):\n    args[0] = d[0].data_ptr() + 0\n",
    "pointer_cache-storage": "args = [0]\ndef custom_kernel(d):\n    args[0] = d[0].untyped_storage().data_ptr()\n",
    "pointer_cache-id": "cache = {}\ndef custom_kernel(d):\n    return cache.get(id(d[0]))\n",
    "dynamic_code": "exec('import os')\n",
    "dynamic_code-getattr": "import os\nname = 'envi' + 'ron'\ngetattr(os, name)\n",
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_each_attack_pattern_is_rejected_with_its_rule_and_line(case):
    findings = [f for f in static_findings(REJECTED[case]) if f.severity == "reject"]
    rule = case.split("-")[0]
    assert any(f.rule == rule for f in findings), findings
    assert all(f.line >= 1 for f in findings)


@pytest.mark.parametrize("source", [SEED, SEEDLIKE, BETTER], ids=["task-seed", "seedlike", "better"])
def test_honest_kernels_pass(source):
    assert [f for f in static_findings(source) if f.severity == "reject"] == []


def test_ordinary_code_is_not_mistaken_for_an_attack():
    source = (
        "import torch, triton\nimport triton.language as tl\n"
        "fp8 = getattr(torch, 'float8_e4m3fnuz', None)\n"
        "def custom_kernel(data):\n    a = data[0].contiguous()\n    c = torch.empty((4, 4))\n"
        "    # torch.matmul in a comment, and 'os.environ' in a string\n    s = 'os.environ'\n"
        "    return triton.cdiv(8, 4)\n"
        "@triton.jit\ndef k(x):\n    y = tl.dot(x, x)\n"
    )
    assert static_findings(source) == []


def test_an_address_written_into_an_argument_list_is_let_through():
    # the launch replay's form: a compiled launcher takes an integer address without a driver call
    source = "def replay(launch, template, data):\n    args = template.copy()\n    args[3] = data[0].data_ptr()\n    launch(*args)\n"
    assert static_findings(source) == []


def test_a_syntax_error_gives_no_findings_so_the_sandbox_reports_it():
    assert static_findings("def broken(:\n") == []


def test_a_kernels_author_is_told_every_rule_a_finding_can_name():
    """rules_text (in the design and implement prompts) lists each rule the attacks above trip,
    the policy rules only where the campaign applies them."""
    told = {line.split(":")[0].removeprefix("- ").removesuffix(" (advice only)") for line in rules_text().splitlines()}
    tripped = {f.rule for source in REJECTED.values() for f in static_findings(source)}
    tripped |= {f.rule for f in static_findings("def f():\n    global cache\n")}  # a warning
    assert tripped <= told
    assert "heavy_op" in told and "heavy_op" not in rules_text(own_kernel=False)
    assert "- global_state (advice only): " in rules_text()
