"""Paths for the package's tests: the repository, the CLI binaries to compare against, and
all-MiniLM-L6-v2 (KIN_MINILM_DIR; its tests skip without it, unless KIN_REQUIRE_MINILM=1)."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def binary(name: str) -> pathlib.Path:
    p = pathlib.Path(os.environ.get("KIN_INFER_BIN_DIR", ROOT / "target" / "release")) / name
    if not p.is_file():
        pytest.fail(f"{p} is missing: build it with `cargo build --release -p kin-infer-cli -p inmotion-cli`")
    return p


@pytest.fixture(scope="session")
def kin_infer_bin() -> pathlib.Path:
    return binary("kin-infer")


@pytest.fixture(scope="session")
def inmotion_bin() -> pathlib.Path:
    return binary("inmotion-infer")


@pytest.fixture(scope="session")
def minilm() -> pathlib.Path:
    d = pathlib.Path(os.environ.get("KIN_MINILM_DIR", ROOT / "models" / "all-MiniLM-L6-v2"))
    if not (d / "model.safetensors").is_file():
        if os.environ.get("KIN_REQUIRE_MINILM") == "1":
            pytest.fail(f"KIN_REQUIRE_MINILM=1 but all-MiniLM-L6-v2 is not at {d}")
        pytest.skip(f"all-MiniLM-L6-v2 not at {d} (scripts/fetch-minilm.sh)")
    return d


@pytest.fixture(scope="session")
def embed_tiny() -> pathlib.Path:
    return ROOT / "tests" / "server_fixtures" / "embed_tiny"


@pytest.fixture(scope="session")
def chat_tiny() -> pathlib.Path:
    return ROOT / "tests" / "server_fixtures" / "chat_tiny"


@pytest.fixture(scope="session")
def inmotion_fixtures() -> pathlib.Path:
    return ROOT / "tests" / "fixtures" / "inmotion"
