"""ckpt.lightning.CheckpointIO under Lightning's DDP (2 processes, gloo,
CPU, lightning_worker.py): a run killed with -9 at a random step on a random
rank and resumed with ckpt_path="last" ends with the same parameters as an
uninterrupted run, and it did resume (from the newest committed epoch-end
version before the kill, the one last.ckpt names, not from scratch); ModelCheckpoint's top-2 and
last.ckpt are pointers to ckpt versions, and the checkpoints it dropped are
deleted from ckpt."""
import os
import random
import re

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (tools/deps.sh ckpt_python_env installs it)")
pytest.importorskip("pytorch_lightning", reason="Lightning is not installed (tools/python-requirements.txt)")

import ckpt.lightning  # noqa: E402
from test_dcp import run_worker  # noqa: E402

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lightning_worker.py")
STEPS_PER_EPOCH, EPOCHS = 4, 5


def finished(out, root):
    m = re.search(r"rank 0: " + re.escape(root) + r": done at step (\d+); pointers (\[.*?\]); versions (\[.*?\])", out)
    assert m, out[-4000:]
    return int(m.group(1)), eval(m.group(2)), eval(m.group(3))


def test_kill_and_resume_matches_an_uninterrupted_run(tmp_path):
    # One launch trains the reference run, then the run killed (-9) at a
    # random step on a random rank; the second resumes that one.
    kill_at, kill_rank = random.randint(STEPS_PER_EPOCH + 1, STEPS_PER_EPOCH * EPOCHS - 1), random.randint(0, 1)
    ref, root, got = str(tmp_path / "ref"), str(tmp_path / "run"), str(tmp_path / "run.pt")
    rc, out = run_worker(WORKER, 2, "--ref-root", ref, "--ref-out", str(tmp_path / "ref.pt"), "--root", root,
                         "--out", got, "--kill-at", str(kill_at), "--kill-rank", str(kill_rank))
    assert rc != 0 and f"rank {kill_rank}: killed at step {kill_at}" in out, out[-4000:]
    assert out.count("training from step 0") == 4  # both runs, both ranks
    step, pointers, versions = finished(out, ref)
    assert step == STEPS_PER_EPOCH * EPOCHS
    # The newest two epochs and last.ckpt; the other versions were deleted.
    assert pointers == ["epoch=3-step=16.ckpt", "epoch=4-step=20.ckpt", "last.ckpt"], pointers
    assert len(versions) == 3 and all(s == "COMMITTED" for _, s in versions), versions
    named = {ckpt.lightning.read_pointer(os.path.join(ref, "ckpts", p))["version"] for p in pointers}
    assert named == {v for v, _ in versions}, (named, versions)

    # What the killed run left to resume from: last.ckpt names the newest
    # version committed (the pointer is written only once it is).
    last = ckpt.lightning.read_pointer(os.path.join(root, "ckpts", "last.ckpt"))
    assert last and last["global_step"] > 0, last

    rc, out = run_worker(WORKER, 2, "--root", root, "--out", got)
    assert rc == 0, out[-4000:]
    assert "Restored all states from the checkpoint at" in out and "last.ckpt" in out, out[-4000:]
    started = {int(s) for s in re.findall(r"training from step (\d+)", out)}
    assert len(started) == 1, started
    start = started.pop()
    # From the newest committed epoch end before the kill (a later save
    # still in flight at the kill is not offered): never from scratch.
    assert start % STEPS_PER_EPOCH == 0 and 0 < start <= kill_at and start == last["global_step"], \
        (start, kill_at, last)
    assert finished(out, root)[0] == STEPS_PER_EPOCH * EPOCHS
    want, have = torch.load(str(tmp_path / "ref.pt")), torch.load(got)
    assert sorted(want) == sorted(have)
    for k in want:
        assert torch.equal(want[k], have[k]), (k, kill_at, kill_rank, start)
