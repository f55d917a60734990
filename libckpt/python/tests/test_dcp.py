"""torch.distributed.checkpoint through ckpt.torch.StorageWriter and
StorageReader: saved by 4 ranks with dcp.async_save (thread executor,
DCP's DefaultStager), loaded by 2 and by 3 (DCP's planner reshards); a save
whose coordinator is killed -9 before its shard (with DCP's metadata) is
durable leaves a version that is not COMMITTED, and the previous one loads;
the same with dcp.async_save's process executor."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (tools/deps.sh ckpt_python_env installs it)")

import ckpt  # noqa: E402
from conftest import SMALL  # noqa: E402
from test_torchrun import TORCHRUN, free_port  # noqa: E402

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dcp_worker.py")


def run_worker(worker, n, *args, timeout=240):
    """worker under torchrun on n ranks: (exit status, output)."""
    cmd = [TORCHRUN, "--nproc-per-node", str(n), "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           worker, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1"))
    return r.returncode, r.stdout + r.stderr


def run(n, *args, timeout=240):
    return run_worker(WORKER, n, *args, timeout=timeout)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("dcp") / "root")
    rc, out = run(4, "--root", root, "--mode", "save", "--version", "1")
    assert rc == 0, out[-4000:]
    assert out.count("saved version 1") == 4
    rc, out = run(4, "--root", root, "--mode", "torn", "--version", "2")
    assert rc != 0  # the coordinator died
    return root


def test_torn_save_is_not_committed(saved):
    with ckpt.Checkpointer("dcp", saved, rank=1, world_size=4, **SMALL) as c:
        states = {v.version: (v.state, v.shards_done) for v in c.versions()}
    assert states[1] == ("COMMITTED", 4)
    assert states[2][0] == "PENDING" and states[2][1] == 3  # every rank but the coordinator


def test_load_on_two_ranks_latest(saved):
    rc, out = run(2, "--root", saved, "--mode", "load", "--expect", "1")
    assert rc == 0, out[-4000:]
    assert out.count("loaded version 1 on 2 ranks") == 2


def test_load_on_three_ranks(saved):
    rc, out = run(3, "--root", saved, "--mode", "load", "--version", "1", "--expect", "1")
    assert rc == 0, out[-4000:]
    assert out.count("loaded version 1 on 3 ranks") == 3


def test_torn_version_is_refused(saved):
    rc, out = run(2, "--root", saved, "--mode", "load", "--version", "2", "--expect", "2")
    assert rc != 0
    assert "NoVersionError" in out or "no such version" in out.lower(), out[-3000:]


def test_async_save_process_executor(tmp_path):
    # dcp.async_save(async_checkpointer_type=PROCESS): the writer goes to a
    # checkpoint process per rank, which opens its own context; a version is
    # COMMITTED with every rank's shard; the coordinator's checkpoint process
    # killed -9 before its shard (with DCP's metadata) is durable fails the
    # save on every rank and leaves that version PENDING; the previous loads.
    rc, out = run(2, "--root", str(tmp_path / "root"), "--mode", "process", "--version", "5")
    assert rc == 0, out[-4000:]
    assert out.count("saved version 5 (process executor)") == 2
    assert out.count("saved version 6 (process executor)") == 2
    assert out.count("the torn save failed") == 2
    assert out.count("loaded version 6") == 2


def test_versions_as_users_pass_them(tmp_path):
    rc, out = run(4, "--root", str(tmp_path / "root"), "--mode", "ids")
    assert rc == 0, out[-4000:]
    assert out.count("versions as users pass them ok") == 4


def test_one_ranks_failure_reaches_every_rank(tmp_path):
    # Each rank raises DCP's CheckpointException holding the failing rank's
    # own ckpt error (pickled across ranks): class, code, message, errno.
    rc, out = run(4, "--root", str(tmp_path / "root"), "--mode", "errors")
    assert rc == 0, out[-4000:]
    assert "TypeError" not in out, out[-4000:]
    assert out.count("rank 2's save failed with SystemCallError errno 27") == 4, out[-4000:]
    assert out.count("the wrong job was refused") == 4
    assert out.count("rank 3's load failed with CorruptError") == 4
    assert out.count("rank 1's wrong job at load") == 4
