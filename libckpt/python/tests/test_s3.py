"""Restore from the SHARED tier on an object store through Python: a Ceph
gateway of this module's own (tests/s3/s3gw.sh; skipped without Ceph, a
failure with CKPT_REQUIRE_S3=1), a bucket holding what the agents upload
(each shard file as its object, then the version's marker), and a
Checkpointer on an empty root with shared_dir="s3://BUCKET/p/": it restores
the newest version bit-exact from the bucket alone. DCP through
ckpt.torch's StorageReader with the bucket as its root: a version saved by
4 ranks (DTensors sharded over them) loads on 2 and on 3 ranks from the
objects alone. (The C library's fallback past a corrupt object is
tests/s3/test_s3_shared.c's.)"""
import os
import subprocess

import numpy as np
import pytest

import ckpt
from conftest import SMALL, shard_files

HERE = os.path.dirname(os.path.abspath(__file__))
S3GW = os.path.join(HERE, "..", "..", "..", "tests", "s3", "s3gw.sh")


def sh(*args, **kw):
    return subprocess.run(["bash", S3GW, *args], check=True, capture_output=True, text=True, **kw).stdout


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    if not os.path.exists(S3GW):
        pytest.skip("no tests/s3/s3gw.sh beside the package's tests")
    rc = subprocess.run(["bash", S3GW, "check"], capture_output=True).returncode
    if rc == 77:
        if os.environ.get("CKPT_REQUIRE_S3") == "1":
            pytest.fail("no Ceph S3 gateway here (tools/deps.sh installs it) and CKPT_REQUIRE_S3=1")
        pytest.skip("no Ceph S3 gateway here")
    d = str(tmp_path_factory.mktemp("s3gw") / "gw")
    env = dict(line.split("=", 1) for line in sh("start", "--dir", d, "--owner", str(os.getpid())).splitlines()
               if "=" in line)
    yield env
    subprocess.run(["bash", S3GW, "stop", env["S3GW_DIR"]], capture_output=True)


def put(gw, bucket, key, path):
    sh("curl", gw["S3GW_DIR"], "-sS", "-f", "-T", path, "%s/%s/%s" % (gw["S3GW_ENDPOINT"], bucket, key))


def upload(gw, bucket, root, job, version, tmp_path):
    """As the agents do: the shard objects first, the marker last."""
    vdir = "p/jobs/%s/v%020d" % (job, version)
    files = shard_files(root, job, version)
    for f in files:
        put(gw, bucket, "%s/%s" % (vdir, os.path.basename(f)), f)
    mk = tmp_path / ("marker-%d" % version)
    mk.write_text("ckpt-shared-commit 1\njob %s\nversion %d\nworld_size %d\nlineage %016x\n" % (job, version,
                                                                                                   len(files), 0))
    put(gw, bucket, vdir + "/COMMITTED", str(mk))


def s3_env(gw, monkeypatch):
    monkeypatch.setenv("CKPT_S3_ENDPOINT", gw["S3GW_ENDPOINT"])
    monkeypatch.setenv("CKPT_S3_REGION", gw.get("S3GW_REGION", "us-east-1"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", gw["S3GW_ACCESS_KEY"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", gw["S3GW_SECRET_KEY"])
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def new_bucket(gw, name):
    return sh("bucket", gw["S3GW_DIR"], name).strip() or name


def two_versions(job, root, seed, rows):
    """A state saved as versions 1 and 2 into root: the state, and its
    arrays at 1 and 2."""
    rng = np.random.default_rng(seed)
    state = {"w": rng.standard_normal((rows, 1024)).astype(np.float32), "step": 1}
    with ckpt.Checkpointer(job, root, **SMALL) as c:
        c.save(1, state).wait()
        v1 = state["w"].copy()
        state["w"] += 1
        state["step"] = 2
        c.save(2, state).wait()
        v2 = state["w"].copy()
    return state, v1, v2


def in_bucket(gw, monkeypatch, tmp_path, job, name, seed, rows, damage=None):
    """two_versions of job, uploaded as the agents do into a new bucket
    (damage(root) first, if given): the URL, the state, its arrays."""
    bucket = new_bucket(gw, "%s-%d" % (name, os.getpid()))
    s3_env(gw, monkeypatch)
    root = str(tmp_path / "node")
    state, v1, v2 = two_versions(job, root, seed, rows)
    if damage:
        damage(root)
    for v in (1, 2):
        upload(gw, bucket, root, job, v, tmp_path)
    return "s3://%s/p/" % bucket, state, v1, v2


def test_restore_from_the_bucket_alone(gw, tmp_path, monkeypatch):
    url, state, v1, v2 = in_bucket(gw, monkeypatch, tmp_path, "s3py", "py", 23, 128)
    # Every node lost: an empty root, nothing but the bucket.
    with ckpt.Checkpointer("s3py", str(tmp_path / "fresh"), shared_dir=url, **SMALL) as c:
        state["w"][:] = 0
        assert c.restore(state) == 2
        assert np.array_equal(state["w"], v2) and state["step"] == 2


def test_dcp_load_from_the_bucket_on_other_world_sizes(gw, tmp_path, monkeypatch):
    from test_dcp import run
    bucket = new_bucket(gw, "pydcp-%d" % os.getpid())
    s3_env(gw, monkeypatch)
    root = str(tmp_path / "node")
    rc, out = run(4, "--root", root, "--mode", "save", "--version", "1")
    assert rc == 0, out[-4000:]
    upload(gw, bucket, root, "dcp", 1, tmp_path)
    url = "s3://%s/p/" % bucket
    for world in (2, 3):
        rc, out = run(world, "--root", url, "--mode", "load", "--expect", "1")
        assert rc == 0, out[-4000:]
        assert out.count("loaded version 1 on %d ranks" % world) == world, out[-3000:]


def test_corrupt_newest_in_the_bucket_falls_back_to_an_older_one(gw, tmp_path, monkeypatch):
    # The versions exist in the bucket alone (an empty root, no daemon):
    # the newest one's object has a flipped byte; restore() and load()
    # find the chunk's checksum wrong and take version 1, bit-exact, which
    # only the bucket knows of (restore() returned None, "no checkpoint",
    # when the version it fell back from was not in this root's index).
    from conftest import corrupt

    def damage(root):
        corrupt(shard_files(root, "s3fb", 2)[0], at=4096 * 40 + 3)  # in the tensor's chunks
    url, state, v1, _ = in_bucket(gw, monkeypatch, tmp_path, "s3fb", "pyfb", 5, 64, damage)
    with ckpt.Checkpointer("s3fb", str(tmp_path / "fresh"), shared_dir=url, **SMALL) as c:
        state["w"][:] = 0
        with pytest.warns(RuntimeWarning, match="falling back to version 1"):
            got = c.restore(state)
        assert got == 1 and np.array_equal(state["w"], v1) and state["step"] == 1
    with ckpt.Checkpointer("s3fb", str(tmp_path / "fresh2"), shared_dir=url, **SMALL) as c:
        sd = c.load()
        assert np.array_equal(sd["w"], v1) and sd["step"] == 1
