"""torch.distributed.checkpoint over ckpt: StorageWriter and StorageReader.

    import torch.distributed.checkpoint as dcp
    from ckpt.torch import StorageWriter, StorageReader

    dcp.save(sd, storage_writer=StorageWriter("job", root), checkpoint_id=step)
    dcp.load(sd, storage_reader=StorageReader("job", root))          # the newest committed

Each rank's items (tensors as they are, BytesIO items as bytes) are the
regions of its shard of version ``checkpoint_id``. Every rank but the
coordinator saves in write_data and waits until its shard is durable; the
coordinator saves its shard only in finish(), with DCP's global metadata in
it. ckpt commits a version when every rank's shard is durable, so a version
is COMMITTED only once all data and the metadata are; a crash in between
leaves a PENDING version that no reader is ever offered.

Reading goes through ckpt's view of a committed version (ckpt_view_*),
which reads any rank's items with every chunk verified: DCP's planner
reshards, so a version saved by 4 ranks loads on 2 or 3.
"""
from __future__ import annotations

import atexit
import io
import os
import pickle
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
import torch.distributed as dist
from torch.futures import Future
from torch.distributed.checkpoint import Metadata, StorageReader as _Reader, StorageWriter as _Writer
from torch.distributed.checkpoint.metadata import StorageMeta
from torch.distributed.checkpoint.planner import (LoadItemType, LoadPlan, LoadPlanner, SavePlan, SavePlanner,
                                                  WriteItemType)
from torch.distributed.checkpoint.storage import WriteResult

from . import _ckpt
from . import torch as _ct  # noqa: F401  (tensors in states)
from .checkpointer import Checkpointer, open_roots
from .errors import InvalidInputError, MismatchError, StateError

_EINVAL = -22
METADATA = "dcp.metadata"           # the coordinator's state key
METADATA_REGION = "s." + METADATA   # its region (Checkpointer names leaves "s.<path>")


@dataclass(frozen=True)
class ItemLocation:
    """Where one DCP item lives: storage_data of its MetadataIndex."""
    version: int
    region: str           # the region's name in the rank's shard
    rank: int
    nbytes: int
    dtype: Optional[str]  # torch dtype name for tensors, None for bytes
    shape: Optional[Tuple[int, ...]]


def _version(checkpoint_id) -> Optional[int]:
    if checkpoint_id is None:
        return None
    if isinstance(checkpoint_id, int) and not isinstance(checkpoint_id, bool) and checkpoint_id >= 0:
        return checkpoint_id
    if isinstance(checkpoint_id, str) and checkpoint_id.isdigit():
        return int(checkpoint_id)
    raise InvalidInputError(_EINVAL, f"checkpoint_id must be a version number (an int >= 0), not {checkpoint_id!r}")


def _rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


_process_cks: Dict[Tuple[Any, ...], Checkpointer] = {}


def _process_checkpointer(job, root, settings) -> Checkpointer:
    """The Checkpointer of a process that receives pickled writers (DCP's
    checkpoint process): one per job, root and settings, kept open across
    saves (opening one allocates its staging pool) and closed at exit."""
    key = (job, root, tuple(sorted((k, str(v)) for k, v in settings.items())))
    ck = _process_cks.get(key)
    if ck is None or ck.closed:
        if not _process_cks:
            atexit.register(_close_process_checkpointers)
        ck = _process_cks[key] = Checkpointer(job, root, **settings)
    return ck


def _close_process_checkpointers() -> None:
    for ck in _process_cks.values():
        ck.close()
    _process_cks.clear()


class StorageWriter(_Writer):
    """Writes DCP checkpoints as ckpt versions.

    job, root and settings open a Checkpointer on first use (rank and world
    size from the torch.distributed group), or pass ``checkpointer``.
    ``checkpoint_id`` (dcp.save's argument, or ``step`` here) is the
    version number.
    """

    def __init__(self, job: Optional[str] = None, root: Optional[str] = None, *, step: Optional[int] = None,
                 checkpointer: Optional[Checkpointer] = None, timeout: Optional[float] = None, **settings: Any):
        super().__init__()
        if checkpointer is None and job is None:
            raise InvalidInputError(_EINVAL, "StorageWriter needs a job (and root) or a checkpointer")
        self.job, self.root, self.settings = job, root, settings
        self.step = _version(step)
        self.timeout = timeout
        self._ck = checkpointer
        self._own = checkpointer is None
        self._shared = False  # unpickled in a checkpoint process: its shared Checkpointer
        self._pending: Optional[Dict[str, Any]] = None
        self.is_coordinator = False
        self.rank = 0

    def __getstate__(self):
        # DCP's process executor pickles the writer to its checkpoint
        # process at each save: the context stays here, the other process
        # opens its own from the same job, root and settings (rank and
        # world size from its process group, which mirrors this one).
        d = dict(self.__dict__)
        if self._ck is not None and self.job is None:
            d["job"], d["root"], d["settings"] = self._ck.open_args
        d["_ck"], d["_pending"] = None, None
        d["_own"], d["_shared"] = False, True
        return d

    def checkpointer(self) -> Checkpointer:
        if self._ck is None or self._ck.closed:
            if self._shared:
                self._ck = _process_checkpointer(self.job, self.root, self.settings)
            else:
                self._ck = Checkpointer(self.job, self.root, **self.settings)
                self._own = True
        return self._ck

    def close(self) -> None:
        """Closes the Checkpointer this writer opened (a dcp.load of the same
        root in this process needs it closed: LMDB's one-environment rule)."""
        if self._own and self._ck is not None:
            self._ck.close()
            self._ck = None

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None) -> None:
        v = _version(checkpoint_id) if not isinstance(checkpoint_id, os.PathLike) else _version(str(checkpoint_id))
        if v is not None:
            self.step = v
        self._pending = None

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator
        self.rank = kwargs.get("rank", _rank())
        if self.step is None:
            raise InvalidInputError(_EINVAL, "StorageWriter: no version: pass checkpoint_id=step to dcp.save")

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans: List[SavePlan]) -> List[SavePlan]:
        return plans

    def storage_meta(self) -> Optional[StorageMeta]:
        return StorageMeta(checkpoint_id=str(self.step) if self.step is not None else None)

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> "Future[List[WriteResult]]":
        state: Dict[str, Any] = {}
        results: List[WriteResult] = []
        for n, item in enumerate(plan.items):
            data = planner.resolve_data(item)
            key = f"r{self.rank}i{n}"
            region = "s." + key
            if item.type == WriteItemType.BYTE_IO:
                buf = bytearray(data.getbuffer())
                state[key] = buf
                loc = ItemLocation(self.step, region, self.rank, len(buf), None, None)
            else:
                t = data.detach()
                if t.device.type != "cpu":
                    t = t.cpu()
                state[key] = t
                loc = ItemLocation(self.step, region, self.rank, t.numel() * t.element_size(),
                                   str(t.dtype).replace("torch.", ""), tuple(t.shape))
            results.append(WriteResult(index=item.index, size_in_bytes=loc.nbytes, storage_data=loc))
        if self.is_coordinator:
            self._pending = state  # saved in finish(), with the global metadata
        else:
            self.checkpointer().save(self.step, state).wait(timeout=self.timeout)
        fut: Future = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata: Metadata, results: List[List[WriteResult]]) -> None:
        if self._pending is None:
            raise StateError(-(_ckpt.ESTATE), "StorageWriter.finish before write_data")
        metadata.storage_data = {wr.index: wr.storage_data for rs in results for wr in rs}
        state = self._pending
        state[METADATA] = bytearray(pickle.dumps(metadata, protocol=pickle.HIGHEST_PROTOCOL))
        self._pending = None
        st = self.checkpointer().save(self.step, state).wait(timeout=self.timeout)
        if not st.committed:
            raise StateError(-(_ckpt.ESTATE), f"version {self.step}: the metadata is durable but the version is "
                                              f"not COMMITTED: a rank's shard is missing")

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        try:
            return _version(checkpoint_id) is not None
        except InvalidInputError:
            return False


class StorageReader(_Reader):
    """Reads DCP checkpoints from ckpt versions: ``step`` (or dcp.load's
    checkpoint_id), or the newest COMMITTED version by default."""

    def __init__(self, job: str, root: str, *, step: Union[int, str, None] = None):
        super().__init__()
        self.job, self.root = job, root
        self.step = _version(step) if step not in (None, "latest") else None
        self.storage_data: Dict[Any, ItemLocation] = {}
        self._view = None
        self._version: Optional[int] = None

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None) -> None:
        if checkpoint_id is not None and checkpoint_id != "latest":
            self.step = _version(checkpoint_id)
        self.storage_data = {}
        self._close_view()

    def _open(self, version: Optional[int]):
        if os.path.realpath(self.root) in open_roots():
            raise StateError(-(_ckpt.ESTATE), f"a Checkpointer on {self.root} is open in this process: close it "
                                              f"first (LMDB allows one environment per file per process)")
        if self._view is None or (version is not None and self._version != version):
            self._close_view()
            self._view = _ckpt.View(self.root, self.job, _ckpt.LATEST if version is None else version)
            self._version = self._view.info()[0]
        return self._view

    def _close_view(self):
        if self._view is not None:
            self._view.close()
            self._view = None

    def _read(self, region: str, nbytes: int, into=None) -> Any:
        v = self._view
        i = v.find(region)
        if i is None:
            raise MismatchError(-(_ckpt.EMISMATCH), f"version {self._version} has no region '{region}'")
        buf = into if into is not None else bytearray(nbytes)
        v.read_into(i, 0, buf)
        return buf

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        self._open(self.step)
        i = self._view.find(METADATA_REGION)
        if i is None:
            raise MismatchError(-(_ckpt.EMISMATCH), f"version {self._version} of '{self.job}' was not written by "
                                                     f"ckpt.torch.StorageWriter (no {METADATA})")
        size = self._view.tensor(i)[3]
        md = pickle.loads(bytes(self._read(METADATA_REGION, size)))
        if getattr(md, "storage_meta", None) is None:
            md.storage_meta = StorageMeta()
        return md

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.storage_data = metadata.storage_data
        versions = {loc.version for loc in self.storage_data.values()}
        if len(versions) != 1:
            raise MismatchError(-(_ckpt.EMISMATCH), f"DCP metadata names versions {sorted(versions)}")
        self._open(versions.pop())

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: List[LoadPlan]) -> List[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> "Future[None]":
        from torch.distributed._shard._utils import narrow_tensor_by_index
        for req in plan.items:
            loc: ItemLocation = self.storage_data[req.storage_index]
            if req.type == LoadItemType.BYTE_IO:
                planner.load_bytes(req, io.BytesIO(bytes(self._read(loc.region, loc.nbytes))))
                continue
            saved = torch.empty(loc.shape, dtype=getattr(torch, loc.dtype))
            if saved.numel():
                self._read(loc.region, loc.nbytes, into=_ct._host_buffer(saved))
            piece = narrow_tensor_by_index(saved, req.storage_offsets, req.lengths)
            target = planner.resolve_tensor(req).detach()
            if target.size() != piece.size():
                raise MismatchError(-(_ckpt.EMISMATCH), f"{req.storage_index}: saved {tuple(piece.size())}, "
                                                         f"loading into {tuple(target.size())}")
            target.copy_(piece)
            planner.commit_tensor(req, target)
        fut: Future = Future()
        fut.set_result(None)
        return fut

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        try:
            return checkpoint_id == "latest" or _version(checkpoint_id) is not None
        except InvalidInputError:
            return False
