"""FSDP2 through DCP and ckpt: fully_shard models with get_state_dict /
set_state_dict (model and AdamW), saved on 4 gloo ranks with dcp.save and
dcp.async_save (thread and process executors), loaded on 2 and on 3 ranks:
every tensor equal to the saved one (fsdp_worker.py)."""
import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (tools/deps.sh ckpt_python_env installs it)")
pytest.importorskip("torch.distributed.fsdp", reason="this torch has no FSDP2")

from test_dcp import run_worker  # noqa: E402

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fsdp_worker.py")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("fsdp") / "root")
    rc, out = run_worker(WORKER, 4, "--root", root, "--mode", "save")
    assert rc == 0, out[-4000:]
    for what in ("1 (dcp.save)", "2 (thread)", "3 (process)"):
        assert out.count(f"saved version {what}") == 4, out[-4000:]
    return root


@pytest.mark.parametrize("n", [2, 3])
def test_fsdp2_loads_on_fewer_ranks(saved, n):
    rc, out = run_worker(WORKER, n, "--root", saved, "--mode", "load")
    assert rc == 0, out[-4000:]
    for v in (1, 2, 3):
        assert out.count(f"version {v} loaded on {n} ranks, 24 tensors equal") == n, out[-4000:]
