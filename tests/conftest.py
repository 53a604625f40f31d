import pytest


@pytest.fixture
def board_path(tmp_path):
    return tmp_path / "board.sqlite"
