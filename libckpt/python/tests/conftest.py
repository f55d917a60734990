"""Shared fixtures: a fresh checkpoint root per test, small pools, and no
CKPT_* or launcher variables leaking in from the environment."""
import os

import pytest


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for k in list(os.environ):
        if k.startswith("CKPT_") or k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RESTART_COUNT"):
            monkeypatch.delenv(k, raising=False)


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "ckpt")


SMALL = {"staging_bytes": "4M", "chunk_bytes": "64K"}


def shard_files(root, job, version):
    d = os.path.join(root, "jobs", job, "v%020d" % version)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".ckpt"))


def corrupt(path, at=None):
    """Flips a byte of a shard file's chunk data."""
    size = os.path.getsize(path)
    at = 4096 + 17 if at is None else at
    assert at < size
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())
