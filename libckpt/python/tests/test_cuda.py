"""CUDA tensors through ckpt.Checkpointer. Skipped without a CUDA device
(tools/gpu-check.sh runs them on a GPU machine). With a library built with
CUDA (ckpt._ckpt.cuda_available()) the tensors are CUDA regions, read where
they live; without, they go through pinned host copies. Both paths give the
same answers here; ``path`` in the skip/pass output says which ran."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (tools/deps.sh ckpt_python_env installs it)")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import ckpt  # noqa: E402
import ckpt.torch  # noqa: E402,F401
from ckpt import _ckpt  # noqa: E402
from conftest import SMALL  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.uint8, torch.bool, torch.float64]
DIRECT = _ckpt.cuda_available()  # CUDA regions (else staged through host memory)


def rand(dtype, shape, seed, device="cuda"):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.Size(shape).numel()) * torch.empty((), dtype=dtype).element_size()
    bits = torch.randint(0, 256, (n,), generator=g, dtype=torch.uint8)
    t = bits.view(dtype).reshape(shape) if dtype != torch.bool else (bits[: n].reshape(shape) % 2 == 1)
    return t.to(device)


def same(a, b):
    """Same dtype, shape and bytes (wherever each lives)."""
    return (a.dtype == b.dtype and a.shape == b.shape and
            torch.equal(a.cpu().contiguous().view(torch.uint8), b.cpu().contiguous().view(torch.uint8)))


def make_state(seed=0):
    st = {str(d).replace("torch.", ""): rand(d, (33, 257), seed + i) for i, d in enumerate(DTYPES)}
    st["big"] = rand(torch.float32, (1 << 18,), seed + 50)       # several 64 KiB chunks
    st["strided"] = rand(torch.float32, (64, 48), seed + 60).t()  # not contiguous: a device copy
    st["empty"] = torch.empty(0, 3, device="cuda")
    st["cpu"] = rand(torch.int32, (40,), seed + 70, device="cpu")
    st["step"] = 7
    return st


def clobber(st):
    for v in st.values():
        if isinstance(v, torch.Tensor) and v.numel():
            v.fill_(False) if v.dtype == torch.bool else v.zero_()


def test_round_trip_restore_in_place_and_load(root):
    want = make_state()
    st = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in want.items()}
    st["strided"] = want["strided"].t().clone().t()  # the same values, not contiguous
    ptrs = {k: v.data_ptr() for k, v in st.items() if isinstance(v, torch.Tensor)}
    with ckpt.Checkpointer("cu", root, **SMALL) as c:
        c.save(1, st).wait()
        clobber(st)
        assert c.restore(st) == 1
        for k, v in want.items():
            if isinstance(v, torch.Tensor):
                assert st[k].device == v.device and same(st[k], v), k
                assert st[k].data_ptr() == ptrs[k], k  # in place
        got = c.load()
        for k, v in want.items():
            if isinstance(v, torch.Tensor):
                assert got[k].device.type == "cpu" and same(got[k], v), k
        assert got["step"] == 7


def test_snapshot_follows_queued_work(root):
    # The snapshot is ordered after work queued on torch's current stream
    # (a side stream made current, too); a restore after work still queued
    # on the tensors: the restored bytes win.
    with ckpt.Checkpointer("cu", root, **SMALL) as c:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            t = torch.zeros(1 << 20, device="cuda")
            torch.cuda._sleep(200_000_000)  # the stream stays busy while save() runs
            t.add_(3)
            c.save(1, {"t": t}).wait()
        assert torch.equal(c.load()["t"], torch.full((1 << 20,), 3.0))
        torch.cuda._sleep(200_000_000)
        t.add_(1)                          # queued on the default stream
        assert c.restore({"t": t}) == 1
        assert torch.equal(t.cpu(), torch.full((1 << 20,), 3.0))


def test_lazy_save_fence_then_modify(root):
    want = make_state(3)
    st = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in want.items()}
    with ckpt.Checkpointer("cu", root, lazy_check=True, **SMALL) as c:
        h = c.save(2, st, lazy=True)
        c.fence()
        clobber(st)                        # allowed after fence()
        h.wait()
        assert c.restore(st) == 2
        for k, v in want.items():
            if isinstance(v, torch.Tensor):
                assert same(st[k], v), k


@pytest.mark.skipif(not DIRECT, reason="the library has no CUDA: saves are eager copies through host memory")
def test_lazy_contract_broken_is_detected(root):
    t = rand(torch.float32, (1 << 18,), 9)
    keep = t.cpu()
    c = ckpt.Checkpointer("cu", root, lazy_check=True, **SMALL)
    try:
        c.save(1, {"t": t}).wait()
        h = c.save(2, {"t": t}, lazy=True)
        t.add_(1)                          # before fence(): the contract is broken
        with pytest.raises(ckpt.ContractError):
            c.fence()
        # The copy was taken before the change (version 2 is then a good
        # snapshot) or after it (the save fails: its checksum differs from
        # the save point's): the changed bytes never become version 2.
        try:
            h.wait()
        except ckpt.ContractError:
            pass
        back = torch.empty_like(t)
        assert c.restore({"t": back}) in (1, 2)
        assert same(back, keep)
    finally:
        try:
            c.close()
        except ckpt.ContractError:
            pass                           # close() reports the failed save again


def test_moved_storage_registered_again(root):
    with ckpt.Checkpointer("cu", root, **SMALL) as c:
        st = {"w": rand(torch.bfloat16, (128, 64), 1)}
        c.save(1, st).wait()
        st["w"] = rand(torch.bfloat16, (256, 64), 2)   # new storage, new size
        keep = st["w"].clone()
        c.save(2, st).wait()
        st["w"].zero_()
        assert c.restore(st) == 2 and same(st["w"], keep)
        assert c.load(1)["w"].shape == (128, 64)
        with pytest.raises(ckpt.MismatchError):
            c.restore(st, version=1)       # the saved shape differs


@pytest.mark.skipif(torch.cuda.device_count() < 2 or not DIRECT, reason="one CUDA device, or no CUDA regions")
def test_tensors_on_two_devices_refused(root):
    with ckpt.Checkpointer("cu", root, **SMALL) as c:
        st = {"a": torch.ones(4, device="cuda:0"), "b": torch.ones(4, device="cuda:1")}
        with pytest.raises(ckpt.InvalidInputError, match="devices 0, 1"):
            c.save(1, st)
        c.save(1, {"b": st["b"]}).wait()  # the library takes device 1 (made current for it)
        with pytest.raises(ckpt.InvalidInputError, match="device 1"):
            c.save(2, {"a": st["a"]})
        st["b"].zero_()
        assert c.restore({"b": st["b"]}) == 1 and torch.equal(st["b"].cpu(), torch.ones(4))
