"""ckpt without torch: numpy arrays, bytes and objects through save, restore
and load; settings; errors; the GIL released while a save is waited on."""
import os
import pickle
import threading
import time
import warnings

import numpy as np
import pytest

import ckpt
from conftest import SMALL, corrupt, shard_files

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64]


def rand(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


def make_state(seed=0):
    big = rand(np.float32, (300, 257), seed)  # several 64 KiB chunks
    return {
        "arrays": {np.dtype(d).name: rand(d, (5, 7), seed + i) for i, d in enumerate(DTYPES)},
        "big": big,
        "empty": np.zeros((0, 3), dtype=np.float32),
        "scalar": np.array(3.5, dtype=np.float64),
        "strided": rand(np.int32, (6, 8), seed + 99)[:, ::2],   # not contiguous
        "fortran": np.asfortranarray(rand(np.float64, (4, 3), seed + 7)),
        "raw": b"\x00\x01payload",
        "buf": bytearray(b"mutable"),
        "objects": {"lr": 0.1, "name": "run", "sched": {"milestones": [3, 5]}, "set": {1, 2, 3}, "none": None},
        "opt": {"state": {0: {"step": 4}, 1: {"step": 4}}, "groups": [{"params": [0, 1]}]},
        "tuple": (np.arange(4, dtype=np.int64), "t"),
        "step": 11,
    }


def assert_same(a, b):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a.keys()) == list(b.keys())
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == np.ascontiguousarray(b).tobytes()
    else:
        assert a == b and type(a) is type(b)


def clobber(state):
    for v in state["arrays"].values():
        v[...] = 0
    state["big"][...] = -1
    state["strided"][...] = 7
    state["fortran"][...] = 2
    state["scalar"][...] = 0
    state["raw"] = b""
    state["objects"]["lr"] = 99
    state["opt"]["state"][0]["step"] = 0
    state["step"] = 0


def test_round_trip_every_dtype(root):
    want = make_state()
    state = make_state()
    with ckpt.Checkpointer("rt", root, **SMALL) as c:
        st = c.save(5, state).wait()
        assert st.version == 5 and st.committed and st.tier == "local_disk"
        assert st.bytes >= state["big"].nbytes
        clobber(state)
        strided_base = state["strided"].base
        assert c.restore(state) == 5
        assert_same(want, state)
        assert state["strided"].base is strided_base  # in place, through the view
        got = c.load()
        assert_same(want, got)
        assert got["big"].ctypes.data % 4096 == 0  # read straight into it
        assert [v.version for v in c.versions()] == [5]
        assert c.latest() == 5


def test_moved_storage_is_registered_again(root):
    with ckpt.Checkpointer("mv", root, **SMALL) as c:
        state = {"w": np.arange(10, dtype=np.float32)}
        c.save(1, state).wait()
        state["w"] = np.arange(1000, dtype=np.float32) * 2  # new storage, new size
        c.save(2, state).wait()
        state["w"][:] = 0
        assert c.restore(state) == 2
        assert np.array_equal(state["w"], np.arange(1000, dtype=np.float32) * 2)
        old = c.load(1)
        assert np.array_equal(old["w"], np.arange(10, dtype=np.float32))


def test_done_and_wait_timeout(root):
    with ckpt.Checkpointer("dn", root, faults="save.before_fsync=delay:1500", **SMALL) as c:
        h = c.save(1, {"x": np.ones(1000)})
        with pytest.raises(ckpt.WaitTimeoutError) as ei:
            h.wait(timeout=0.05)
        assert isinstance(ei.value, TimeoutError) and ei.value.code < 0
        assert not h.done()
        h.wait()
        assert h.done()


def test_corrupt_newest_falls_back_with_warning(root):
    state = {"w": rand(np.float32, (64, 1024), 1)}
    with ckpt.Checkpointer("cor", root, **SMALL) as c:
        c.save(1, state).wait()
        first = state["w"].copy()
        state["w"] += 1
        c.save(2, state).wait()
    corrupt(shard_files(root, "cor", 2)[0], at=4096 + 100000)
    with ckpt.Checkpointer("cor", root, **SMALL) as c:
        state["w"][:] = 0
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert c.restore(state) == 1
        assert any("version 2" in str(x.message) and "falling back" in str(x.message) for x in w)
        assert np.array_equal(state["w"], first)
        with pytest.raises(ckpt.CorruptError):
            c.restore(state, version=2)  # asked for by number: no fallback
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert np.array_equal(c.load()["w"], first)


def test_nothing_saved(root):
    with ckpt.Checkpointer("none", root, **SMALL) as c:
        assert c.restore({"x": np.zeros(3)}) is None
        assert c.load() is None
        assert c.versions() == [] and c.latest() is None
        with pytest.raises(ckpt.NoVersionError):
            c.restore({"x": np.zeros(3)}, version=4)


def saved_bytes(root, job):
    d = os.path.join(root, "jobs", job)
    out = {}
    for dp, _, fs in os.walk(d):
        for f in fs:
            if f.endswith(".ckpt"):
                with open(os.path.join(dp, f), "rb") as fh:
                    out[os.path.join(dp, f)] = fh.read()
    return out


def test_bad_input(root):
    state = make_state()
    with ckpt.Checkpointer("bad", root, **SMALL) as c:
        c.save(1, state).wait()
        before = saved_bytes(root, "bad")
        live = make_state(seed=5)
        snapshot = pickle.dumps({k: v for k, v in live.items() if k != "objects"})

        # Structure: a missing key, an extra key, a list of another length.
        s = make_state(seed=5)
        del s["big"]
        with pytest.raises(ckpt.MismatchError, match="keys differ"):
            c.restore(s)
        s = make_state(seed=5)
        s["opt"]["groups"].append({})
        with pytest.raises(ckpt.MismatchError, match="opt/groups"):
            c.restore(s)
        # Shapes and dtypes.
        s = make_state(seed=5)
        s["big"] = np.zeros((300, 256), dtype=np.float32)
        with pytest.raises(ckpt.MismatchError, match=r"big: saved as f32\[300, 257\]"):
            c.restore(s)
        s = make_state(seed=5)
        s["arrays"]["float32"] = s["arrays"]["float32"].astype(np.float64)
        with pytest.raises(ckpt.MismatchError, match="arrays/float32: saved as f32"):
            c.restore(s)
        s = make_state(seed=5)
        s["big"] = "not an array"
        with pytest.raises(ckpt.MismatchError):
            c.restore(s)
        # The state refused was not touched.
        assert pickle.dumps({k: v for k, v in live.items() if k != "objects"}) == snapshot

        # Unpicklable objects, unsupported input.
        with pytest.raises(ckpt.PickleError, match="hook"):
            c.save(2, {"hook": lambda x: x, "w": np.ones(3)})
        with pytest.raises(ckpt.PickleError, match="lock"):
            c.save(2, {"nested": {"lock": threading.Lock()}})
        with pytest.raises(ckpt.UnsupportedTypeError):
            c.save(2, np.ones(3))
        with pytest.raises(ckpt.InvalidInputError):
            c.save(-1, state)
        cyc = {"a": 1}
        cyc["self"] = cyc
        with pytest.raises(ckpt.InvalidInputError, match="contains itself"):
            c.save(2, cyc)
        with pytest.raises(ckpt.InvalidInputError, match="tier"):
            c.save(3, {"w": np.ones(2)}).wait(tier="tape")
        with pytest.raises(ckpt.InvalidInputError):
            c.restore(state, version="newest")
        # Saving the same committed version again.
        with pytest.raises(ckpt.SystemCallError) as ei:
            c.save(1, state)
        assert ei.value.errno == 17  # EEXIST
        # Every error is a ckpt.Error with the C code.
        try:
            c.restore({"only": np.zeros(1)})
        except ckpt.Error as e:
            assert e.code == -ckpt._ckpt.EMISMATCH and "keys differ" in e.message
        assert c.load(1) is not None
    # Nothing of version 1 changed, and it still restores exactly.
    with ckpt.Checkpointer("bad", root, **SMALL) as c:
        after = {p: b for p, b in saved_bytes(root, "bad").items() if "v%020d" % 1 in p}
        assert after == {p: b for p, b in before.items()}
        s = make_state(seed=5)
        assert c.restore(s, version=1) == 1
        assert_same(make_state(), s)


def test_closed_checkpointer(root):
    c = ckpt.Checkpointer("closed", root, **SMALL)
    c.save(1, {"w": np.ones(4)}).wait()
    c.close()
    c.close()  # idempotent
    assert c.closed
    for call in (lambda: c.save(2, {"w": np.ones(4)}), lambda: c.restore({"w": np.ones(4)}),
                 lambda: c.load(), lambda: c.versions(), lambda: c.fence(), lambda: c.step(1)):
        with pytest.raises(ckpt.ClosedError, match="closed"):
            call()


def test_bad_job_and_settings(root):
    with pytest.raises(ckpt.InvalidNameError):
        ckpt.Checkpointer("bad/job", root, **SMALL)
    with pytest.raises(ckpt.InvalidNameError):
        ckpt.Checkpointer("", root, **SMALL)
    with pytest.raises(ckpt.InvalidNameError):
        ckpt.Checkpointer(".hidden", root, **SMALL)
    with pytest.raises(ckpt.ConfigError, match="job must be a str"):
        ckpt.Checkpointer(7, root)
    with pytest.raises(ckpt.ConfigError, match="no_such_setting"):
        ckpt.Checkpointer("j", root, no_such_setting=1)
    with pytest.raises(ckpt.ConfigError, match="staging_bytes"):
        ckpt.Checkpointer("j", root, staging_bytes="lots")
    with pytest.raises(ckpt.ConfigError):
        ckpt.Checkpointer("j", root, staging_bytes=[1.5])


def test_settings_precedence(root, monkeypatch):
    # torchrun's variables when nothing else says.
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with ckpt.Checkpointer("prec", root, **SMALL) as c:
        c.save(1, {"w": np.ones(4)}).wait()
        v = c.versions()[0]
        assert v.world_size == 2 and v.state == "PENDING"  # rank 0 has not saved
    # CKPT_* beats torchrun's; keywords beat both.
    monkeypatch.setenv("CKPT_RANK", "0")
    monkeypatch.setenv("CKPT_WORLD_SIZE", "2")
    with ckpt.Checkpointer("prec", root, **SMALL) as c:
        c.save(1, {"w": np.ones(4)}).wait()
        assert c.versions()[0].state == "COMMITTED"  # rank 0's shard came from CKPT_RANK
    with ckpt.Checkpointer("prec", root, rank=0, world_size=1, **SMALL) as c:
        c.save(3, {"w": np.ones(4)}).wait()
        assert [v.world_size for v in c.versions()] == [2, 1]
    monkeypatch.setenv("CKPT_STAGING_BYTES", "nonsense")
    with pytest.raises(ckpt.ConfigError):
        ckpt.Checkpointer("prec", root)


def test_step_interval(root):
    with ckpt.Checkpointer("steps", root, interval=3, **SMALL) as c:
        assert [c.step(i) for i in range(1, 7)] == ["continue", "continue", "save", "continue", "continue",
                                                     "save"]


def test_gil_released_while_waiting(root):
    """Another thread runs Python code while this one waits on a save."""
    state = {"w": np.ones(1 << 20, dtype=np.float32)}
    with ckpt.Checkpointer("gil", root, faults="save.before_fsync=delay:1500", **SMALL) as c:
        ticks = []
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                ticks.append(time.monotonic())

        h = c.save(1, state)
        t = threading.Thread(target=spin)
        t.start()
        t0 = time.monotonic()
        h.wait()
        t1 = time.monotonic()
        stop.set()
        t.join()
        assert t1 - t0 >= 1.0  # the delay fault held the save
        during = [x for x in ticks if t0 < x < t1]
        # With the GIL held the spinner would not run at all during wait().
        assert len(during) > 1000
        assert during[-1] - during[0] > 0.5 * (t1 - t0)


def test_errors_map_codes():
    e = ckpt.errors.from_code(-ckpt._ckpt.ECORRUPT, "x")
    assert isinstance(e, ckpt.CorruptError) and e.code == -ckpt._ckpt.ECORRUPT
    e = ckpt.errors.from_code(-2, "missing")
    assert isinstance(e, ckpt.SystemCallError) and isinstance(e, OSError) and e.errno == 2
    assert "corrupt" in ckpt.strerror(-ckpt._ckpt.ECORRUPT)
    assert "job_id" in ckpt.config_help()


def test_every_error_pickles():
    """DCP sends a rank's exception to the others pickled: every class comes
    back as itself, with its code, message, errno and the attributes set
    after it was made (restore tags a corrupt version)."""
    import errno
    import pickle
    classes = [getattr(ckpt, n) for n in ckpt.__all__
               if isinstance(getattr(ckpt, n), type) and issubclass(getattr(ckpt, n), ckpt.Error)]
    assert len(classes) >= 20 and ckpt.SystemCallError in classes
    for cls in classes:
        code = -errno.ENOSPC if issubclass(cls, ckpt.SystemCallError) else -ckpt._ckpt.ECORRUPT
        e = cls(code, f"{cls.__name__}: what went wrong")
        e.version = 42
        for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
            got = pickle.loads(pickle.dumps(e, protocol=proto))
            assert type(got) is cls
            assert (got.code, got.message, got.version, str(got)) == (code, e.message, 42, str(e))
            if issubclass(cls, ckpt.SystemCallError):
                assert got.errno == errno.ENOSPC and isinstance(got, OSError)
    # An error raised by the library, through the factory, the same.
    with pytest.raises(ckpt.InvalidNameError) as ei:
        ckpt.Checkpointer("bad/job", "/nonexistent-root-for-the-test")
    got = pickle.loads(pickle.dumps(ei.value))
    assert type(got) is ckpt.InvalidNameError and got.code == ei.value.code and got.message == ei.value.message


def test_import_without_torch():
    """import ckpt never imports torch."""
    import subprocess
    import sys
    code = "import sys, ckpt; import numpy; assert 'torch' not in sys.modules, 'torch imported'; print('ok')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_cuda_regions_of_one_device():
    # The device logic of CUDA tensors, without a device: the library takes
    # one device's CUDA regions, the one of its first; staged leaves (host
    # copies) and host leaves do not count.
    from ckpt import _ckpt, _state
    from ckpt.checkpointer import cuda_device_of

    def leaf(device, index=None):
        return _state.Leaf("torch", "f32", (1,), 4, device, 0, ("k", id(object())), cuda_index=index)
    host, cuda0, cuda1 = leaf(_ckpt.DEVICE_HOST), leaf(_ckpt.DEVICE_CUDA, 0), leaf(_ckpt.DEVICE_CUDA, 1)
    assert cuda_device_of([host], None) is None
    assert cuda_device_of([host], 1) is None
    assert cuda_device_of([host, cuda1, cuda1], None) == 1
    assert cuda_device_of([cuda1], 1) == 1
    with pytest.raises(ckpt.InvalidInputError, match="devices 0, 1"):
        cuda_device_of([cuda0, host, cuda1], None)
    with pytest.raises(ckpt.InvalidInputError, match="on device 0, but this Checkpointer's are on device 1"):
        cuda_device_of([cuda0], 1)


def test_default_staging_fits_the_state(root):
    """staging_bytes left alone: the first save sizes the pool from the
    state, so a save larger than the pool a context opens with copies and
    returns instead of waiting for a slow disk."""
    np = pytest.importorskip("numpy")
    state = {f"t{i}": np.full(64 << 10, i, dtype=np.float32) for i in range(16)}  # 4 MiB, 64 chunks
    with ckpt.Checkpointer("auto", root, chunk_bytes="64K", faults="persist.chunk=delay:40") as ck:
        pool0, _ = ck._ctx.staging_size()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning: it fits
            st = [ck.save(v, state).wait() for v in (1, 2)]
        pool, need = ck._ctx.staging_size()
        assert pool0 < need <= pool, (pool0, need, pool)
        # Streaming 64 chunks through the opening pool (9 slots, 2 workers,
        # 40 ms a chunk) would stall > 1 s.
        assert st[1].stall_s < 0.5, st[1]
        assert st[1].durable_s > 1.0, st[1]  # the slow disk is real
        out = ck.load()
        assert all(np.array_equal(out[k], v) for k, v in state.items())


def test_save_larger_than_the_pool_warns_once(root):
    np = pytest.importorskip("numpy")
    state = {"a": np.ones(1 << 20, dtype=np.float32)}  # 4 MiB
    with ckpt.Checkpointer("small", root, chunk_bytes="64K", staging_bytes="256K") as ck:
        with pytest.warns(RuntimeWarning, match=r'pool of 0.25 MiB.*staging_bytes="5M"') as rec:  # the state and its 3 metadata chunks
            for v in (1, 2, 3):
                ck.save(v, state).wait()
        assert len([w for w in rec if "staging pool" in str(w.message)]) == 1
