"""The example trainer under torchrun, 4 ranks over gloo: killed with -9 at a
random step and resumed, it ends bit-identical to an uninterrupted run;
SIGTERM makes it save one step and exit cleanly, and the relaunch resumes
from that step."""
import glob
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (tools/deps.sh ckpt_python_env installs it)")

import ckpt  # noqa: E402
from conftest import SMALL  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.normpath(os.path.join(HERE, "..", "..", "..", "tools", "example", "torch_train.py"))
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
STEPS = 24


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_CORPUS = []


@pytest.fixture(scope="module", autouse=True)
def frozen_corpus(tmp_path_factory):
    """The example learns the repository's docs/*.md. Every launch of this
    module reads one frozen copy of them, so that an edit of the docs while
    the tests run (in a checkout being worked in) cannot change the data
    between a reference run and the resumed one."""
    d = tmp_path_factory.mktemp("text")
    for f in sorted(glob.glob(os.path.join(HERE, "..", "..", "..", "docs", "*.md"))):
        shutil.copy(f, d)
    _CORPUS[:] = [os.path.join(str(d), "*.md")]
    yield


def corpus():
    return _CORPUS[0]


def launch(root, log, *extra, steps=STEPS, final=None):
    cmd = [TORCHRUN, "--nproc-per-node", "4", "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           EXAMPLE, "--root", root, "--steps", str(steps), "--loss-log", log, "--save-every", "4",
           "--text", corpus(), *extra]
    if final:
        cmd += ["--final", final]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def finish(p, timeout=300):
    out, _ = p.communicate(timeout=timeout)
    return p.returncode, out


def losses(log):
    out = {}
    with open(log) as f:
        for line in f:
            m = re.fullmatch(r"step (\d+) loss (\S+)\n", line)
            assert m, line
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def wait_for_step(log, step, p, timeout=240):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if os.path.exists(log) and any(s >= step for s in losses(log)):
            return
        if p.poll() is not None:
            raise AssertionError(f"trainer ended before step {step}: {p.communicate()[0][-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"step {step} not reached in {timeout} s")


def descendants(pid):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, pending = [], [pid]
    while pending:
        q = pending.pop()
        out.append(q)
        pending.extend(kids.get(q, []))
    return out


def same_state(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same_state(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same_state(x, y)
    elif torch.is_tensor(a):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
    else:
        assert a == b


def test_kill9_resume_is_bit_identical(tmp_path):
    ref_log, ref_final = str(tmp_path / "ref.log"), str(tmp_path / "ref.pt")
    rc, out = finish(launch(str(tmp_path / "ref"), ref_log, final=ref_final))
    assert rc == 0, out[-3000:]
    ref = losses(ref_log)
    assert sorted(ref) == list(range(1, STEPS + 1))

    root, log, final = str(tmp_path / "run"), str(tmp_path / "run.log"), str(tmp_path / "run.pt")
    # From step 9 on, version 4 is durable on every rank (each waited for it before saving 8).
    kill_at = random.Random(os.getpid()).randint(9, STEPS - 4)
    p = launch(root, log, "--step-sleep", "0.3")
    wait_for_step(log, kill_at, p)
    for pid in descendants(p.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait(timeout=60)
    killed = max(losses(log))
    rc, out = finish(launch(root, log, final=final))
    assert rc == 0, out[-3000:]
    m = re.search(r"resumed from step (\d+)", out)
    assert m, out[-3000:]
    resumed = int(m.group(1))
    assert 4 <= resumed <= killed and resumed % 4 == 0, (resumed, killed)
    got = losses(log)
    assert sorted(got) == list(range(1, STEPS + 1))
    for step, vals in got.items():
        assert all(v == ref[step][0] for v in vals), (step, vals, ref[step])
    # Steps after the restore point ran twice, with the same losses.
    assert all(len(got[s]) == 2 for s in range(resumed + 1, killed + 1))
    same_state(torch.load(ref_final), torch.load(final))


def test_sigterm_saves_once_and_resumes(tmp_path):
    root, log = str(tmp_path / "term"), str(tmp_path / "term.log")
    p = launch(root, log, "--step-sleep", "0.3", "--save-every", "1000", steps=1000)
    wait_for_step(log, 5, p)
    p.send_signal(signal.SIGTERM)  # to torchrun, which passes it on to the ranks
    rc, out = finish(p, timeout=120)
    said = re.findall(r"rank (\d): preempted, saved step (\d+), exiting", out)
    assert sorted(r for r, _ in said) == ["0", "1", "2", "3"], out[-3000:]
    steps = {int(s) for _, s in said}
    assert len(steps) == 1, said
    saved = steps.pop()
    assert saved >= 5
    # torchrun itself reports the signal it got with a traceback; the ranks raise nothing.
    assert all("SignalException" in part for part in out.split("Traceback")[1:]), out[-3000:]
    with ckpt.Checkpointer("charlm", root, rank=0, world_size=4, **SMALL) as c:
        vs = c.versions()
    assert [(v.version, v.state) for v in vs] == [(saved, "COMMITTED")]
    before = losses(log)
    assert max(before) == saved

    rc, out = finish(launch(root, log, steps=saved + 3))
    assert rc == 0, out[-3000:]
    assert f"resumed from step {saved}" in out
    after = losses(log)
    assert sorted(after) == list(range(1, saved + 4))
    assert all(len(v) == 1 for v in after.values())
