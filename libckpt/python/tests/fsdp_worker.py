"""One rank of test_fsdp.py (under torchrun, gloo, CPU): FSDP2.

save: a small model sharded with fully_shard (each layer, then the root),
      AdamW after two steps; its state through
      torch.distributed.checkpoint.state_dict.get_state_dict (model and
      optimizer, DTensors) saved through ckpt.torch.StorageWriter three
      times, one optimizer step apart: dcp.save with no checkpoint_id
      (version 1), dcp.async_save with the thread executor (2) and with the
      process executor (3). Rank 0 keeps every tensor in full (torch.save)
      beside, for the loaders to compare with.
load: a model of the same shape, initialised otherwise, sharded over this
      run's ranks; each version loaded with dcp.load through
      ckpt.torch.StorageReader and set_state_dict; every parameter and
      optimizer tensor equal to the saved one, in full.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from ckpt.torch import StorageReader, StorageWriter

SMALL = {"chunk_bytes": "64K"}


def model_and_opt(world, seed):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(16, 40), torch.nn.ReLU(), torch.nn.Linear(40, 24), torch.nn.ReLU(),
                            torch.nn.Linear(24, 5))
    mesh = init_device_mesh("cpu", (world,))
    for layer in m:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    return m, torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)


def train_step(m, opt, step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(8, 16, generator=g)
    loss = m(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()


def full(sd):
    """Every tensor of a (nested) state dict in full, by path."""
    out = {}

    def walk(x, path):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}/{k}")
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, f"{path}/{i}")
        elif isinstance(x, DTensor):
            out[path] = x.full_tensor()
        elif isinstance(x, torch.Tensor):
            out[path] = x.clone()
        else:
            out[path] = x
    walk(sd, "")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--mode", choices=["save", "load"], required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ref = os.path.join(a.root, "reference")
    if a.mode == "save":
        m, opt = model_and_opt(world, seed=1)
        w = StorageWriter("fsdp", a.root, **SMALL)
        for step, kind in ((1, None), (2, AsyncCheckpointerType.THREAD), (3, AsyncCheckpointerType.PROCESS)):
            train_step(m, opt, step, rank)
            msd, osd = get_state_dict(m, opt)
            sd = {"model": msd, "optim": osd}
            want = full(sd)
            if kind is None:
                md = dcp.save(sd, storage_writer=w)
            else:
                md = dcp.async_save(sd, storage_writer=w, async_checkpointer_type=kind).result()
            # The version the coordinator chose (the process executor's
            # writer is a copy in the checkpoint process: its metadata says).
            assert md.storage_meta.checkpoint_id == str(step), (md, step)
            if rank == 0:
                os.makedirs(ref, exist_ok=True)
                torch.save(want, os.path.join(ref, f"v{step}.pt"))
            print(f"rank {rank}: saved version {step} ({kind.name.lower() if kind else 'dcp.save'})", flush=True)
        w.close()
    else:
        m, opt = model_and_opt(world, seed=99)
        train_step(m, opt, 0, rank)  # other values everywhere
        for step in (1, 2, 3):
            msd, osd = get_state_dict(m, opt)
            sd = {"model": msd, "optim": osd}
            r = StorageReader("fsdp", a.root)
            dcp.load(sd, storage_reader=r, checkpoint_id=f"step-{step}")
            r.reset()
            set_state_dict(m, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
            got = full(dict(zip(("model", "optim"), get_state_dict(m, opt))))
            want = torch.load(os.path.join(ref, f"v{step}.pt"), weights_only=False)
            assert sorted(got) == sorted(want), (sorted(got), sorted(want))
            for k, v in want.items():
                if isinstance(v, torch.Tensor):
                    assert got[k].dtype == v.dtype and torch.equal(got[k], v), (step, k)
                else:
                    assert got[k] == v, (step, k, got[k], v)
            ntensors = sum(isinstance(v, torch.Tensor) for v in want.values())
            print(f"rank {rank}: version {step} loaded on {world} ranks, {ntensors} tensors equal", flush=True)
        # The model trains on from the loaded state.
        train_step(m, opt, 4, rank)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # as dcp_worker.py: no C++ teardown after every check passed
