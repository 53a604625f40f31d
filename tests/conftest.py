import os
import sys

import pytest


def pytest_collection_finish(session):
    """Triton decides at import whether its own jit functions (tl.cdiv, ...) are interpreted, so a
    test module that imports it while collecting, before tests/test_task.py sets TRITON_INTERPRET,
    breaks every interpreted kernel that runs later in this process. Name the cause at once instead."""
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise pytest.UsageError(
            "a test module imported triton while collecting; import it inside the test "
            "(or find it with importlib.util.find_spec) so the interpreter can be set first"
        )


@pytest.fixture
def board_path(tmp_path):
    return tmp_path / "board.sqlite"
