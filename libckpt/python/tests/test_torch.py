"""Tensors through ckpt.Checkpointer: every dtype, 0-size and non-contiguous
tensors, modules and optimizers restored in place and loaded."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (tools/deps.sh ckpt_python_env installs it)")

import ckpt  # noqa: E402
import ckpt.torch  # noqa: E402,F401
from conftest import SMALL  # noqa: E402

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32,
          torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.float8_e4m3fn,
          torch.float8_e5m2]


def rand(dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(0, 256, (int(np.prod(shape)) * torch.empty((), dtype=dtype).element_size(),),
                         generator=g, dtype=torch.uint8)
    t = bits.view(dtype).reshape(shape).clone()
    if dtype == torch.bool:
        t = bits[: t.numel()].reshape(shape) % 2 == 1
    return t


def bits(t):
    return t.contiguous().reshape(-1).view(torch.uint8).tolist() if t.numel() else []


def test_every_dtype_and_layout(root):
    want = {str(d): rand(d, (3, 5), i) for i, d in enumerate(DTYPES)}
    want["empty"] = torch.empty(0, 4)
    want["scalar"] = torch.tensor(2.5, dtype=torch.bfloat16)
    base = rand(torch.float32, (8, 6), 40)
    want["transposed"] = base.t()          # not contiguous
    want["sliced"] = rand(torch.int64, (10,), 41)[::3]
    state = {k: v.clone() if k not in ("transposed", "sliced") else v for k, v in want.items()}
    keep = {k: bits(v) for k, v in state.items()}
    with ckpt.Checkpointer("tt", root, **SMALL) as c:
        c.save(3, state).wait()
        for v in state.values():
            if v.numel():
                v.zero_() if v.dtype != torch.bool else v.fill_(False)
        base.fill_(0)
        assert c.restore(state) == 3
        for k, v in state.items():
            assert bits(v) == keep[k], k
        assert state["transposed"].data_ptr() == base.data_ptr()  # through the view
        got = c.load()
        for k, v in got.items():
            assert v.dtype == state[k].dtype and v.shape == state[k].shape and v.device.type == "cpu"
            assert bits(v) == keep[k], k


def test_module_and_optimizer(root):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(64, 16)
    for _ in range(3):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": 3}
    ref = {k: v.clone() for k, v in model.state_dict().items()}
    ref_opt = {i: {k: v.clone() if torch.is_tensor(v) else v for k, v in s.items()}
               for i, s in opt.state_dict()["state"].items()}
    with ckpt.Checkpointer("mo", root, **SMALL) as c:
        c.save(3, state).wait()
        # Train on: parameters and moments change in place.
        for _ in range(2):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
        assert not torch.equal(model[0].weight, ref["0.weight"])
        state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": 5}
        assert c.restore(state) == 3
        assert state["step"] == 3
        for k, v in model.state_dict().items():
            assert torch.equal(v, ref[k]), k      # the live parameters, in place
        for i, s in opt.state_dict()["state"].items():
            for k, v in s.items():
                assert torch.equal(v, ref_opt[i][k]) if torch.is_tensor(v) else v == ref_opt[i][k]
        # A fresh model and optimizer, the torch way: load, then load_state_dict.
        m2 = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        o2 = torch.optim.AdamW(m2.parameters(), lr=1e-2)
        sd = c.load()
        m2.load_state_dict(sd["model"])
        o2.load_state_dict(sd["optim"])
        for k, v in m2.state_dict().items():
            assert torch.equal(v, ref[k])
        assert o2.state_dict()["param_groups"][0]["lr"] == 1e-2


def test_moved_tensor_registered_again(root):
    with ckpt.Checkpointer("mv", root, **SMALL) as c:
        state = {"w": torch.ones(10)}
        c.save(1, state).wait()
        state["w"].add_(1)                      # same storage: same region
        c.save(2, state).wait()
        state["w"] = torch.full((3, 3), 7.0, dtype=torch.bfloat16)  # new storage, size, dtype
        c.save(3, state).wait()
        assert torch.equal(c.load(2)["w"], torch.full((10,), 2.0))
        assert torch.equal(c.load(3)["w"], torch.full((3, 3), 7.0, dtype=torch.bfloat16))


def test_wrong_dtype_and_shape(root):
    with ckpt.Checkpointer("wd", root, **SMALL) as c:
        c.save(1, {"w": torch.ones(4, 4)}).wait()
        live = {"w": torch.zeros(4, 4, dtype=torch.float16)}
        with pytest.raises(ckpt.MismatchError, match=r"w: saved as f32\[4, 4\], the state has f16\[4, 4\]"):
            c.restore(live)
        assert torch.equal(live["w"], torch.zeros(4, 4, dtype=torch.float16))
        with pytest.raises(ckpt.MismatchError, match=r"\[2, 8\]"):
            c.restore({"w": torch.zeros(2, 8)})
        with pytest.raises(ckpt.UnsupportedTypeError, match="complex"):
            c.save(2, {"z": torch.zeros(3, dtype=torch.complex64)})
        assert torch.equal(c.load(1)["w"], torch.ones(4, 4))


def test_dtensor_records_global_shape(root, monkeypatch):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(29400 + (hash(root) % 500)))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        dt = distribute_tensor(torch.arange(12.0).reshape(4, 3), mesh, [Shard(0)])
        with ckpt.Checkpointer("dt", root, **SMALL) as c:
            c.save(1, {"w": dt}).wait()
            got = c.load()
            assert torch.equal(got["w"], torch.arange(12.0).reshape(4, 3))
            entry = c._read_meta(1)[1]["tree"]["v"][0]
            assert entry["global_shape"] == [4, 3] and entry["offsets"] == [0, 0] and entry["dtensor"]
    finally:
        dist.destroy_process_group()


def test_large_tensors_aligned_and_misaligned(root):
    # load() builds page-aligned tensors (the library reads chunks straight
    # into them); restore in place into tensors at odd addresses (torch's
    # 64-byte alignment, here a slice 4 bytes in) takes the copy path.
    n = 96 << 10
    want = {"f32": rand(torch.float32, (n // 4,), 1), "bf16": rand(torch.bfloat16, (3, n // 6), 2),
            "bool": rand(torch.bool, (n,), 3), "u8": rand(torch.uint8, (n + 5,), 4)}
    backing = {k: torch.zeros(v.numel() * v.element_size() + 4, dtype=torch.uint8) for k, v in want.items()}
    state = {k: backing[k][4:].view(v.dtype).view(v.shape) for k, v in want.items()}
    for k, v in state.items():
        v.copy_(want[k])
        assert v.data_ptr() % 4096 != 0
    with ckpt.Checkpointer("al", root, **SMALL) as c:
        c.save(1, state).wait()
        for v in state.values():
            v.view(torch.uint8).fill_(0xA5)
        assert c.restore(state) == 1
        for k, v in state.items():
            assert bits(v) == bits(want[k]), k
        got = c.load()
        for k, v in got.items():
            assert v.data_ptr() % 4096 == 0, k
            assert v.dtype == want[k].dtype and v.shape == want[k].shape, k
            assert bits(v) == bits(want[k]), k


def test_saved_state_is_freed_without_the_cycle_collector(root):
    """A state saved through dcp.save and ckpt.torch.StorageWriter, or
    walked by a Checkpointer, is freed as soon as the caller drops it, with
    the cycle collector off: nothing of the library's walk over the state
    may sit in a reference cycle (a self-referencing closure held every
    tensor of every save until a gc pass, so back-to-back async saves grew
    by a state's size each). The tensors sit on numpy arrays, whose weak
    references say when the memory itself is freed."""
    import gc
    import weakref

    import torch.distributed.checkpoint as dcp
    from ckpt.torch import StorageWriter

    def fresh(seed, n):
        arrays = [np.random.default_rng(seed * 10 + i).standard_normal(4096).astype(np.float32) for i in range(n)]
        return arrays, [weakref.ref(a) for a in arrays]

    w = StorageWriter("dcpcycle", root)
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        alive = []
        for step in (1, 2, 3):
            arrays, refs = fresh(step, 4)
            state = {f"t{i}": torch.from_numpy(a) for i, a in enumerate(arrays)}
            dcp.save(state, storage_writer=w, checkpoint_id=step, no_dist=True)
            del state, arrays
            alive.append(sum(r() is not None for r in refs))
        arrays, refs = fresh(9, 3)
        state = {"a": torch.from_numpy(arrays[0]), "b": [torch.from_numpy(arrays[1]), {"c": arrays[2]}]}
        flat = ckpt._state.flatten(state)
        del flat, state, arrays
        alive.append(sum(r() is not None for r in refs))
    finally:
        if was:
            gc.enable()
    w.close()
    assert alive == [0, 0, 0, 0], f"arrays alive after each save / walk with gc off: {alive}"


def test_dcp_writer_keeps_no_state_between_saves(root):
    """After dcp.save through ckpt.torch.StorageWriter returns, the writer
    holds nothing of the state it saved: DCP's stagers hand it a fresh copy
    at every save, and keeping the last one (its regions registered) held
    a whole state's memory in the allocator until the next save."""
    import gc
    import weakref

    import torch.distributed.checkpoint as dcp
    from ckpt.torch import StorageReader, StorageWriter

    w = StorageWriter("dcpref", root)
    alive = []
    for step in (1, 2):
        arrays = [np.random.default_rng(step * 10 + i).standard_normal(4096).astype(np.float32) for i in range(4)]
        refs = [weakref.ref(a) for a in arrays]
        state = {f"t{i}": torch.from_numpy(a) for i, a in enumerate(arrays)}
        want = {k: v.clone() for k, v in state.items()}
        dcp.save(state, storage_writer=w, checkpoint_id=step, no_dist=True)
        del state, arrays
        gc.collect()
        alive.append(sum(r() is not None for r in refs))
    assert alive == [0, 0], f"tensors the writer still holds after each save: {alive}"
    w.close()
    into = {k: torch.zeros_like(v) for k, v in want.items()}
    dcp.load(into, storage_reader=StorageReader("dcpref", root), checkpoint_id=2, no_dist=True)
    for k in want:
        assert torch.equal(into[k], want[k]), k
