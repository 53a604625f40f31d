"""A new leader profiled on a GPU (``evaluator.profile``): Nsight Compute's CSV read per launch,
the harness's profiled call, and the table the designer is shown.

No GPU here, so ncu cannot run: its CSV layout (the default page, one row per metric of each
launch, as ncu 2025.x writes it) is written out below with invented values, and a stand-in ncu
(``KS_NCU``) writes that text to its ``--log-file`` and then runs the harness it was given, as
ncu does. Everything else is real: the sandboxed harness process runs the candidate's tests, its
warm-up call and the profiled call under Triton's interpreter (the local backend's CPU mode).
"""

from __future__ import annotations

import stat
import sys

import anyio
import pytest
from _support import ROOT, small_campaign, small_task_folder
from kernel_scientist.blackboard.profile import profile_line, profile_table
from kernel_scientist.blackboard.records import Profile, Shape
from kernel_scientist.evaluator import load_task
from kernel_scientist.evaluator.backends import LocalBackend
from kernel_scientist.evaluator.sandbox._ncu import NcuError, command, parse

HEAD = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _rows(launch: int, kernel: str, grid: str, values: dict[str, tuple[str, str]]) -> list[str]:
    return [
        f'"{launch}","4242","python3","127.0.0.1","{kernel}","1","7","(128, 1, 1)","{grid}","0","9.0",'
        f'"Command line profiler metrics","{metric}","{unit}","{value}"'
        for metric, (unit, value) in values.items()
    ]


CSV = "\n".join(
    [
        "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
        HEAD,
        *_rows(
            1,
            "add_kernel",
            "(4096, 1, 1)",
            {
                "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "88.41"),
                "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": ("%", "90.02"),
                "gpu__time_duration.sum": ("usecond", "1,204.80"),
                "launch__registers_per_thread": ("register/thread", "16"),
                "lts__t_sector_hit_rate.pct": ("%", "n/a"),
                "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "11.30"),
                "sm__warps_active.avg.pct_of_peak_sustained_active": ("%", "71.5"),
            },
        ),
        *_rows(
            0,
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, ...)",
            "(2, 1, 1)",
            {
                "gpu__time_duration.sum": ("nsecond", "2,112"),
                "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("%", "0.4"),
            },
        ),
        "==PROF== Disconnected from process 4242",
    ]
)


def test_ncus_csv_is_read_per_launch_in_its_order_with_its_units():
    fill, add = parse(CSV)
    assert fill.kernel.startswith("void at::native::vectorized_elementwise_kernel") and fill.time_us == 2.112
    assert (add.kernel, add.grid, add.block) == ("add_kernel", "(4096, 1, 1)", "(128, 1, 1)")
    assert add.time_us == 1204.8 and add.registers == 16  # thousands separator, microseconds
    assert (add.sm_pct, add.memory_pct, add.dram_pct, add.occupancy_pct) == (11.3, 90.02, 88.41, 71.5)
    assert add.l2_hit_pct is None  # "n/a": unknown, not zero
    odd_unit = CSV.replace('"usecond","1,204.80"', '"furlong","3"')
    assert parse(odd_unit)[1].time_us is None  # a unit this reader does not know is never scaled wrongly


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            "==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission "
            "to access NVIDIA GPU Performance Counters on the target device 0.\n",
            "ERR_NVGPUCTRPERM - The user does not have permission",
        ),
        ("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n", "No kernels were profiled."),
        ("", "no kernel was profiled"),
        (HEAD + "\n", "no kernel was profiled"),
    ],
)
def test_ncu_without_a_reading_says_why_in_one_line(text, why):
    with pytest.raises(NcuError, match=why.replace(".", r"\.")):
        parse(text)


def test_the_command_profiles_only_the_harnesss_range_at_the_gpus_own_clocks(tmp_path):
    cmd = command("/opt/ncu", tmp_path / "log.csv")
    assert cmd[0] == "/opt/ncu" and "--csv" in cmd
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--log-file") + 1] == str(tmp_path / "log.csv")
    assert "gpu__time_duration.sum" in cmd[cmd.index("--metrics") + 1]


# ncu's own behaviour for the harness: write the CSV to --log-file, run the command it was given
# (with the result pipe the parent passed it), answer --version.
_STAND_IN = """#!{python}
import os, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nCopyright (c) 2018-2025 NVIDIA Corporation\\nVersion 2025.3.1.0 (build 36398880) (public-release)")
    sys.exit(0)
with_value = {{"--profile-from-start", "--clock-control", "--metrics", "--log-file"}}
i, log = 0, None
while args[i].startswith("--"):
    if args[i] == "--log-file":
        log = args[i + 1]
    i += 2 if args[i] in with_value else 1
with open({marker!r}, "a") as f:
    f.write(" ".join(args[i:]) + "\\n")
with open(log, "w") as f:
    f.write({csv!r})
os.execv(args[i], args[i:])
"""


@pytest.fixture
def stand_in_ncu(tmp_path, monkeypatch):
    path, marker = tmp_path / "ncu", tmp_path / "ran.txt"
    path.write_text(_STAND_IN.format(python=sys.executable, csv=CSV, marker=str(marker)))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("KS_NCU", str(path))
    return marker


VECADD = ROOT / "tests" / "problems" / "vecadd"


def _profile(source: str, shape: int = 0) -> Profile:
    with LocalBackend(load_task(VECADD), device="cpu", spare=False, timeout_s=120) as backend:
        return anyio.run(lambda: backend.profile(source, shape, secret_seed=3), backend="trio")


def test_the_local_backend_profiles_one_call_in_its_sandboxed_harness(stand_in_ncu):
    profile = _profile((VECADD / "submission.py").read_text())
    assert profile.error == "" and profile.tool == "Nsight Compute 2025.3.1.0"
    assert profile.shape == load_task(VECADD).benchmarks[0]  # the task's shape, not the secret-seeded one
    assert [k.kernel for k in profile.launches][1] == "add_kernel"
    assert "kernel_scientist.evaluator.sandbox._gpu_harness" in stand_in_ncu.read_text()


def test_a_candidate_that_fails_its_check_gets_no_profile_and_the_reason(stand_in_ncu):
    profile = _profile((VECADD / "solutions" / "wrong" / "drops_tail.py").read_text())
    assert profile.launches == [] and profile.error.startswith("the profiled run failed: wrong_output: ")


def test_without_ncu_there_is_no_profile_and_it_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("KS_NCU", str(tmp_path / "missing"))
    profile = _profile((VECADD / "submission.py").read_text())
    assert profile.launches == [] and "Nsight Compute (ncu) is not on this machine" in profile.error
    assert profile_table(profile) == f"No profile of the call on {profile.shape.label()}: {profile.error}"


def test_the_table_and_the_line_show_each_launchs_counters():
    profile = Profile(shape=Shape(m=64, n=64, k=128, seed=1), launches=parse(CSV), tool="Nsight Compute 2025.3.1.0")
    table = profile_table(profile)
    assert table.splitlines()[0] == (
        "Profile of one call on 64x64x128 (Nsight Compute 2025.3.1.0; % of each unit's peak):"
    )
    assert "| add_kernel | (4096, 1, 1) | (128, 1, 1) | 1204.8 us | 11% | 90% | 88% | - | 72% | 16 |" in table
    assert profile_line(profile) == (
        "profiled one call on 64x64x128 (2 launches); longest add_kernel: 1204.8 us, SM 11%, "
        "memory 90%, DRAM 88%, occupancy 72%"
    )
    assert profile_table(None) == ""


def test_a_campaigns_new_leaders_are_profiled_and_the_designer_sees_it(tmp_path, stand_in_ncu, monkeypatch):
    from kernel_scientist.agents._views import kernel_view
    from kernel_scientist.blackboard import load_scenario, metrics, open_existing

    from kernel_scientist import campaign

    small_task_folder(tmp_path)
    (tmp_path / "local.toml").write_text(small_campaign("profile-small", "local", 0.004, profile="on"))
    campaign.start(load_scenario(tmp_path / "local.toml"), tmp_path / "run.sqlite")
    with open_existing(tmp_path / "run.sqlite") as board:
        evaluations = board.evaluations()
        profiled = [e for e in evaluations if e.report.profile is not None]
        leader = metrics.leader(evaluations)
        said = [m.text for m in board.messages(agent="evaluator") if "profiled one call" in m.text]
        view = kernel_view(board, board.kernel(evaluations[0].kernel_id), load_task(tmp_path / "tasks" / "small"))
    assert evaluations[0].report.profile is not None  # the seed was the first leader
    assert leader is not None and leader.report.profile is not None
    assert len(profiled) < len(evaluations) or len(evaluations) == 1  # only new leaders
    assert len(said) == len(profiled)
    assert view.profile.startswith("Profile of one call on ")


def test_the_offline_brain_is_not_profiled_by_default(tmp_path, stand_in_ncu):
    from kernel_scientist.blackboard import load_scenario, open_existing

    from kernel_scientist import campaign

    small_task_folder(tmp_path)
    (tmp_path / "local.toml").write_text(small_campaign("profile-auto", "local", 0.002))
    campaign.start(load_scenario(tmp_path / "local.toml"), tmp_path / "run.sqlite")
    with open_existing(tmp_path / "run.sqlite") as board:
        assert all(e.report.profile is None for e in board.evaluations())
    assert not stand_in_ncu.exists()


def test_evaluate_profile_asks_for_a_gpu_in_one_line():
    from _support import cli

    done = cli("evaluate", str(VECADD / "submission.py"), "--task", str(VECADD), "--profile")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "kernel-scientist: --profile needs --backend local: a profiler reads a GPU's counters"
    ]
