"""One rank of the DCP tests (run by test_dcp.py under torchrun).

save:  a state of DTensors sharded over all ranks, a replicated tensor and
       non-tensor items, through ckpt.torch.StorageWriter as version V, with
       dcp.async_save (thread executor).
torn:  the same as version V, with the coordinator killed (-9, a ckpt fault
       point) after every other rank's data is durable, before its own
       shard with DCP's metadata is.
load:  into DTensors sharded over this run's ranks, the newest committed
       version (or --version), checked element for element.
process: versions V and V+1 with dcp.async_save's process executor, both
       COMMITTED with every rank's shard; V+2 with the coordinator's
       checkpoint process killed before its shard is durable: PENDING, and
       the newest committed, V+1, loads.
ids:   versions as users pass them: dcp.save with no checkpoint_id (the
       next version, the same on every rank), "step-1200" paths, dcp.load
       with no id (the newest) and with an id that names no version.
errors: one rank's storage fails (a file size limit: EFBIG; a wrong job;
       a corrupt chunk at load): every rank sees that rank's real ckpt
       error, class, code, message and errno.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

from ckpt.torch import StorageReader, StorageWriter


def full(version):
    return {"w": (torch.arange(24 * 5, dtype=torch.float32).reshape(24, 5) + version),
            "b": (torch.arange(12, dtype=torch.float32) * 0.5 + version).to(torch.bfloat16),
            "rep": torch.arange(7, dtype=torch.int64) * (version + 1)}


def state(mesh, version, zero):
    f = full(version)
    out = {}
    for k in ("w", "b"):
        t = torch.zeros_like(f[k]) if zero else f[k]
        out[k] = distribute_tensor(t, mesh, [Shard(0)])
    out["rep"] = torch.zeros_like(f["rep"]) if zero else f["rep"]
    out["extra"] = {"step": -1 if zero else version, "note": "" if zero else f"version {version}"}
    return out


SMALL = {"staging_bytes": "4M", "chunk_bytes": "64K"}


def check(sd, version):
    want = full(version)
    for k in ("w", "b"):
        got = sd[k].full_tensor()
        assert got.dtype == want[k].dtype and torch.equal(got, want[k]), (k, got, want[k])
    assert sd["extra"] == {"step": version, "note": f"version {version}"}, sd["extra"]


def versions(root):
    from ckpt import Checkpointer
    with Checkpointer("dcp", root, **SMALL) as ck:
        return [(i.version, i.state) for i in ck.versions()]


def ids(a, mesh, rank, world):
    import ckpt
    w = StorageWriter("dcp", a.root, **SMALL)
    # No checkpoint_id: 1 for a new job, then the next after the newest;
    # decided by the coordinator, the same on every rank (each rank's
    # Checkpointer sees the same index).
    for want in (1, 2):
        dcp.save(state(mesh, want, zero=False), storage_writer=w)
        assert w.version == want, (w.version, want)
    dcp.save(state(mesh, 1200, zero=False), storage_writer=w, checkpoint_id=os.path.join(a.root, "step-1200"))
    assert w.version == 1200
    dcp.async_save(state(mesh, 1201, zero=False), storage_writer=w).result()  # the next: 1201
    assert w.version == 1201
    dcp.save(state(mesh, 7, zero=False), storage_writer=w, checkpoint_id="7")
    w.close()
    dist.barrier()
    got = versions(a.root)
    assert got == [(v, "COMMITTED") for v in (1, 2, 7, 1200, 1201)], got
    dist.barrier()
    # dcp.load without an id: the newest; "step-1200" and ".../step-2/": those.
    for cid, want in ((None, 1201), ("step-1200", 1200), ("ckpt/step-2/", 2), (7, 7)):
        sd = state(mesh, 0, zero=True)
        r = StorageReader("dcp", a.root)
        dcp.load(sd, storage_reader=r, checkpoint_id=cid)
        check(sd, want)
        r.reset()
    # An id that names no version, and one that is no version at all.
    for cid, cls, text in (("step-5", "NoVersionError", "version 5 of job 'dcp' is not a committed version"),
                           ("latest-ish", "InvalidInputError", "names no version")):
        try:
            dcp.load(state(mesh, 0, zero=True), storage_reader=StorageReader("dcp", a.root), checkpoint_id=cid)
            raise AssertionError(f"{cid} loaded")
        except BaseException as e:
            if type(e).__name__ == "CheckpointException":  # the error of this rank, as every rank sees it
                e = failure_of(e, rank)
            assert type(e).__name__ == cls and text in str(e), (cid, type(e), str(e)[-600:])
    print(f"rank {rank}: versions as users pass them ok", flush=True)
    dist.barrier()


def failure_of(e, rank):
    """The exception rank raised, as DCP reports it to every rank."""
    from torch.distributed.checkpoint.api import CheckpointException
    assert isinstance(e, CheckpointException), (type(e), e)
    assert rank in e.failures, (rank, list(e.failures))
    return e.failures[rank][0]


def errors(a, mesh, rank, world):
    import errno
    import resource
    import signal
    import ckpt
    from conftest import corrupt, shard_files
    w = StorageWriter("dcp", a.root, **SMALL)
    dcp.save(state(mesh, 1, zero=False), storage_writer=w, checkpoint_id=1)
    w.close()
    # Rank 2's disk refuses to grow its file (RLIMIT_FSIZE: EFBIG, what a
    # full disk does with ENOSPC): every rank gets rank 2's error itself.
    big = dict(state(mesh, 2, zero=False), pad=distribute_tensor(torch.ones(world * 64 << 10), mesh, [Shard(0)]))
    old = resource.getrlimit(resource.RLIMIT_FSIZE)
    if rank == 2:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (128 << 10, old[1]))
    w = StorageWriter("dcp", a.root, **SMALL)
    try:
        dcp.save(big, storage_writer=w, checkpoint_id=2)
        raise AssertionError("the save with rank 2 out of space succeeded")
    except BaseException as e:
        err = failure_of(e, 2)
    finally:
        if rank == 2:
            resource.setrlimit(resource.RLIMIT_FSIZE, old)
    w.close()
    assert type(err) is ckpt.SystemCallError and err.errno == errno.EFBIG and err.code == -errno.EFBIG, \
        (type(err), vars(err))
    assert "version 2" in err.message, err.message
    print(f"rank {rank}: rank 2's save failed with {type(err).__name__} errno {err.errno}: {err.message}",
          flush=True)
    # Rank 1 names another job: refused in the global plan, on every rank.
    w = StorageWriter("dcp" if rank != 1 else "other", a.root, **SMALL)
    try:
        dcp.save(state(mesh, 3, zero=False), storage_writer=w, checkpoint_id=3)
        raise AssertionError("the save with rank 1 on another job succeeded")
    except BaseException as e:
        err = failure_of(e, 0)
    w.close()
    assert type(err) is ckpt.MismatchError and "'other' on ranks [1]" in err.message, (type(err), err)
    print(f"rank {rank}: the wrong job was refused: {err.message}", flush=True)
    dist.barrier()
    # A chunk of rank 3's shard of version 1 corrupt: rank 3's read fails
    # and every rank sees its CorruptError.
    if rank == 0:
        corrupt([p for p in shard_files(a.root, "dcp", 1) if p.endswith("r000003.ckpt")][0])
    dist.barrier()
    try:
        dcp.load(state(mesh, 0, zero=True), storage_reader=StorageReader("dcp", a.root))
        raise AssertionError("a corrupt chunk loaded")
    except BaseException as e:
        err = failure_of(e, 3)
    assert type(err) is ckpt.CorruptError and err.code == -ckpt._ckpt.ECORRUPT, (type(err), err)
    print(f"rank {rank}: rank 3's load failed with {type(err).__name__}: {err.message}", flush=True)
    # Rank 1 reads another job: DCP wraps the metadata error, the message is ckpt's.
    try:
        dcp.load(state(mesh, 0, zero=True), storage_reader=StorageReader("dcp" if rank != 1 else "other", a.root))
        raise AssertionError("a load with rank 1 on another job succeeded")
    except BaseException as e:
        err = failure_of(e, 1)
    assert type(err) is ckpt.NoVersionError and "job 'other' has no committed version" in err.message, \
        (type(err), err)
    print(f"rank {rank}: rank 1's wrong job at load: {str(err)[:200]}", flush=True)
    dist.barrier()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--mode", choices=["save", "torn", "load", "process", "ids", "errors"], required=True)
    p.add_argument("--version", type=int)
    p.add_argument("--expect", type=int)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    if a.mode == "ids":
        ids(a, mesh, rank, world)
    elif a.mode == "errors":
        errors(a, mesh, rank, world)
    elif a.mode == "process":
        # dcp.async_save with the process executor: the writer is pickled to
        # a checkpoint process per rank (kept for later saves), which opens
        # its own context on the root. Two versions, the second through
        # the same processes.
        # The second writer wraps a Checkpointer of this process: the
        # checkpoint process opens one like it.
        from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
        from ckpt import Checkpointer
        settings = {"staging_bytes": "4M", "chunk_bytes": "64K"}
        ck = Checkpointer("dcp", a.root, **settings)
        for v, w in ((a.version, StorageWriter("dcp", a.root, **settings)),
                     (a.version + 1, StorageWriter(checkpointer=ck))):
            fut = dcp.async_save(state(mesh, v, zero=False), storage_writer=w, checkpoint_id=v,
                                 async_checkpointer_type=AsyncCheckpointerType.PROCESS)
            fut.result()
            w.close()
            print(f"rank {rank}: saved version {v} (process executor)", flush=True)
        assert [(i.version, i.state, i.shards_done) for i in ck.versions()] == \
            [(a.version, "COMMITTED", world), (a.version + 1, "COMMITTED", world)], ck.versions()
        # Then the coordinator's checkpoint process killed (-9) before its
        # shard with DCP's metadata is durable: every rank's save fails,
        # and the version is left PENDING without it.
        torn = dict(settings, faults="save.before_fsync=kill") if rank == 0 else settings
        try:
            dcp.async_save(state(mesh, a.version + 2, zero=False), storage_writer=StorageWriter("dcp", a.root, **torn),
                           checkpoint_id=a.version + 2, async_checkpointer_type=AsyncCheckpointerType.PROCESS).result()
            print(f"rank {rank}: the torn save returned", flush=True)
            return 1
        except RuntimeError as e:
            print(f"rank {rank}: the torn save failed: {str(e)[:200]}", flush=True)
        dist.barrier()
        got = [(i.version, i.state, i.shards_done) for i in ck.versions()]
        assert got[-1] == (a.version + 2, "PENDING", world - 1), got
        ck.close()
        sd = state(mesh, 0, zero=True)
        dcp.load(sd, storage_reader=StorageReader("dcp", a.root))
        for k in ("w", "b"):
            assert torch.equal(sd[k].full_tensor(), full(a.version + 1)[k]), k
        assert sd["extra"]["step"] == a.version + 1
        print(f"rank {rank}: loaded version {a.version + 1}", flush=True)
    elif a.mode in ("save", "torn"):
        settings = {"staging_bytes": "4M", "chunk_bytes": "64K"}
        if a.mode == "torn" and rank == 0:
            settings["faults"] = "save.before_fsync=kill"
        w = StorageWriter("dcp", a.root, **settings)
        if a.mode == "save":  # dcp.async_save: the thread executor, DCP's default stager
            dcp.async_save(state(mesh, a.version, zero=False), storage_writer=w, checkpoint_id=a.version).result()
        else:
            dcp.save(state(mesh, a.version, zero=False), storage_writer=w, checkpoint_id=a.version)
        w.close()
        print(f"rank {rank}: saved version {a.version}", flush=True)
    else:
        sd = state(mesh, 0, zero=True)
        r = StorageReader("dcp", a.root, step=a.version)
        dcp.load(sd, storage_reader=r)
        want = full(a.expect)
        for k in ("w", "b"):
            got = sd[k].full_tensor()
            assert got.dtype == want[k].dtype and torch.equal(got, want[k]), (k, got, want[k])
        assert torch.equal(sd["rep"], want["rep"]), sd["rep"]
        assert sd["extra"] == {"step": a.expect, "note": f"version {a.expect}"}, sd["extra"]
        r.reset()  # closes its view
        print(f"rank {rank}: loaded version {a.expect} on {world} ranks", flush=True)
    # No rank tears its connections down while another is still inside a
    # collective (DTensor.full_tensor above): gloo aborts the process that
    # finds its peer gone.
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    rc = main()
    # Every check has passed and been printed. Leave without the interpreter's
    # teardown: torch's C++ side can abort in its static destructors after the
    # process group is gone ("terminate called without an active exception",
    # seen rarely after every rank had printed 'loaded'), which would fail a
    # test whose every assertion held.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
