"""Shared paths: the repository and the `sluice` binary the Rust build made (tools/test-all builds it)."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def sluice_bin() -> Path:
    path = Path(os.environ.get("SLUICE_BIN", REPO / "target" / "release" / "sluice"))
    if not path.exists():
        pytest.fail(f"{path} is missing: build it with `cargo build --release -p sluice-cli` or set SLUICE_BIN")
    return path
