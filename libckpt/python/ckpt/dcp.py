"""torch.distributed.checkpoint over ckpt: StorageWriter and StorageReader.

    import torch.distributed.checkpoint as dcp
    from ckpt.torch import StorageWriter, StorageReader

    dcp.save(sd, storage_writer=StorageWriter("job", root))         # the next version
    dcp.save(sd, storage_writer=StorageWriter("job", root), checkpoint_id="step-1200")
    dcp.load(sd, storage_reader=StorageReader("job", root))          # the newest committed

Each rank's items (tensors as they are, BytesIO items as bytes) are the
regions of its shard of the version: checkpoint_id's number, or without one
the next after the job's newest, chosen by the coordinator in the global
plan. Every rank but the
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
import dataclasses
import io
import os
import pickle
import re
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
from .errors import Error, InvalidInputError, MismatchError, NoVersionError, StateError

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


_ID = re.compile(r"(?:.*[A-Za-z][-_=])?([0-9]+)")


def version_of(checkpoint_id) -> Optional[int]:
    """The version a DCP checkpoint_id names: an int >= 0, or a str or path
    whose last component is "N", or ends in "-N", "_N" or "=N" ("1200",
    "step-1200", "ckpt/step-1200/", "step=1200"). None for None."""
    if checkpoint_id is None:
        return None
    if isinstance(checkpoint_id, int) and not isinstance(checkpoint_id, bool):
        if 0 <= checkpoint_id < _ckpt.LATEST:
            return checkpoint_id
    elif isinstance(checkpoint_id, (str, os.PathLike)):
        text = os.fspath(checkpoint_id)
        if isinstance(text, str):
            m = _ID.fullmatch(os.path.basename(text.rstrip("/")))
            if m and int(m.group(1)) < _ckpt.LATEST:
                return int(m.group(1))
    raise InvalidInputError(_EINVAL, f"checkpoint_id {checkpoint_id!r} names no version: pass an int >= 0, or a "
                                     f"name or path ending in N, step-N, step_N or step=N (N the version), or "
                                     f"no checkpoint_id at all (dcp.save: the next version; dcp.load: the newest)")


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


@dataclass(frozen=True)
class _RankPlan:
    """What a rank tells the coordinator in its local plan."""
    job: str
    world_size: Optional[int]
    asked: Optional[int]     # the version this rank was given, if any
    newest: Optional[int]    # the newest version of the job this rank's index knows (any state)


class StorageWriter(_Writer):
    """Writes DCP checkpoints as ckpt versions.

    job, root and settings open a Checkpointer on first use (rank and world
    size from the torch.distributed group), or pass ``checkpointer``.
    The version: dcp.save's ``checkpoint_id`` (an int, or "1200",
    "step-1200", ".../step-1200"), else ``step`` here, else the next one
    after the newest version of the job. The coordinator decides it once,
    in the global plan, from every rank's index, so every rank saves the
    same version; it also refuses ranks that name another job or version.
    """

    def __init__(self, job: Optional[str] = None, root: Optional[str] = None, *, step: Optional[int] = None,
                 checkpointer: Optional[Checkpointer] = None, timeout: Optional[float] = None, **settings: Any):
        super().__init__()
        if checkpointer is None and job is None:
            raise InvalidInputError(_EINVAL, "StorageWriter needs a job (and root) or a checkpointer")
        self.job, self.root, self.settings = job, root, settings
        self.step = version_of(step)
        self.timeout = timeout
        self._ck = checkpointer
        self._own = checkpointer is None
        self._shared = False  # unpickled in a checkpoint process: its shared Checkpointer
        self._pending: Optional[Dict[str, Any]] = None
        self._asked: Optional[int] = None   # dcp.save's checkpoint_id, for the next save only
        self.version: Optional[int] = None  # the version of the save in progress (or the last one)
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
        # DCP calls it only when dcp.save was given a checkpoint_id.
        self._asked = version_of(checkpoint_id)
        self._pending = None

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator
        self.rank = kwargs.get("rank", _rank())
        self.version = self._asked if self._asked is not None else self.step
        self._asked = None

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        ck = self.checkpointer()
        newest = None
        if self.version is None:
            vs = ck.versions()
            newest = vs[-1].version if vs else None
        world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else None
        return dataclasses.replace(plan, storage_data=_RankPlan(ck.job, world, self.version, newest))

    def prepare_global_plan(self, plans: List[SavePlan]) -> List[SavePlan]:
        """The coordinator: one job and one version for every rank."""
        infos = [p.storage_data for p in plans]
        if not all(isinstance(i, _RankPlan) for i in infos):
            raise StateError(-(_ckpt.ESTATE), "StorageWriter: a rank's plan does not come from "
                                              "ckpt.torch.StorageWriter (every rank needs one)")
        jobs = sorted({i.job for i in infos})
        if len(jobs) > 1:
            by = {j: [r for r, i in enumerate(infos) if i.job == j] for j in jobs}
            raise MismatchError(-(_ckpt.EMISMATCH), "StorageWriter: the ranks save into different jobs: " +
                                "; ".join(f"{j!r} on ranks {by[j]}" for j in jobs))
        asked = sorted({i.asked for i in infos if i.asked is not None})
        if len(asked) > 1 or (asked and any(i.asked is None for i in infos)):
            raise MismatchError(-(_ckpt.EMISMATCH), "StorageWriter: the ranks were given different versions: " +
                                ", ".join(f"rank {r}: {i.asked}" for r, i in enumerate(infos)))
        if asked:
            version = asked[0]
        else:
            newest = [i.newest for i in infos if i.newest is not None]
            version = max(newest) + 1 if newest else 1
        return [dataclasses.replace(p, storage_data=version) for p in plans]

    def storage_meta(self) -> Optional[StorageMeta]:
        v = self._asked if self._asked is not None else self.step
        return StorageMeta(checkpoint_id=str(v) if v is not None else None)

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> "Future[List[WriteResult]]":
        if isinstance(plan.storage_data, int):
            self.version = plan.storage_data
        if self.version is None:
            raise StateError(-(_ckpt.ESTATE), "StorageWriter.write_data: no version was planned")
        state: Dict[str, Any] = {}
        results: List[WriteResult] = []
        for n, item in enumerate(plan.items):
            data = planner.resolve_data(item)
            key = f"r{self.rank}i{n}"
            region = "s." + key
            if item.type == WriteItemType.BYTE_IO:
                buf = bytearray(data.getbuffer())
                state[key] = buf
                loc = ItemLocation(self.version, region, self.rank, len(buf), None, None)
            else:
                t = data.detach()
                if t.device.type != "cpu":
                    t = t.cpu()
                state[key] = t
                loc = ItemLocation(self.version, region, self.rank, t.numel() * t.element_size(),
                                   str(t.dtype).replace("torch.", ""), tuple(t.shape))
            results.append(WriteResult(index=item.index, size_in_bytes=loc.nbytes, storage_data=loc))
        if self.is_coordinator:
            self._pending = state  # saved in finish(), with the global metadata
        else:
            ck = self.checkpointer()
            try:
                ck.save(self.version, state).wait(timeout=self.timeout)
            finally:
                ck._release_regions()  # the planner's tensors: DCP's stagers copy anew at each save
        fut: Future = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata: Metadata, results: List[List[WriteResult]]) -> None:
        if self._pending is None:
            raise StateError(-(_ckpt.ESTATE), "StorageWriter.finish before write_data")
        metadata.storage_data = {wr.index: wr.storage_data for rs in results for wr in rs}
        metadata.storage_meta = StorageMeta(checkpoint_id=str(self.version))
        state = self._pending
        state[METADATA] = bytearray(pickle.dumps(metadata, protocol=pickle.HIGHEST_PROTOCOL))
        self._pending = None
        ck = self.checkpointer()
        try:
            st = ck.save(self.version, state).wait(timeout=self.timeout)
        finally:
            ck._release_regions()
        if not st.committed:
            raise StateError(-(_ckpt.ESTATE), f"version {self.version}: the metadata is durable but the version "
                                              f"is not COMMITTED: a rank's shard is missing")

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        try:
            return version_of(checkpoint_id) is not None
        except InvalidInputError:
            return False


class StorageReader(_Reader):
    """Reads DCP checkpoints from ckpt versions: dcp.load's checkpoint_id
    (as StorageWriter takes it), else ``step``, else the newest COMMITTED
    version. Every rank must load the same version: the coordinator checks
    it in the global plan."""

    def __init__(self, job: str, root: str, *, step: Union[int, str, None] = None):
        super().__init__()
        self.job, self.root = job, root
        self.step = version_of(step) if step not in (None, "latest") else None
        self.storage_data: Dict[Any, ItemLocation] = {}
        self._view = None
        self._version: Optional[int] = None
        self._failed: Optional[Error] = None  # read_metadata's, for set_up_storage_reader

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None) -> None:
        if checkpoint_id is not None:
            self.step = None if checkpoint_id == "latest" else version_of(checkpoint_id)
        self.storage_data = {}
        self._close_view()

    def _open(self, version: Optional[int]):
        if os.path.realpath(self.root) in open_roots():
            raise StateError(-(_ckpt.ESTATE), f"a Checkpointer on {self.root} is open in this process: close it "
                                              f"first (LMDB allows one environment per file per process)")
        if self._view is None or (version is not None and self._version != version):
            self._close_view()
            try:
                self._view = _ckpt.View(self.root, self.job, _ckpt.LATEST if version is None else version)
            except NoVersionError as e:
                if version is None:
                    raise NoVersionError(e.code, f"dcp.load: job '{self.job}' has no committed version in "
                                                 f"{self.root} ({e.message})") from None
                raise NoVersionError(e.code, f"dcp.load: version {version} of job '{self.job}' is not a "
                                             f"committed version in {self.root} (never saved, not complete on "
                                             f"every rank, or deleted); without checkpoint_id dcp.load takes "
                                             f"the newest committed one ({e.message})") from None
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
        try:
            self._open(self.step)
        except Error as e:
            if "rank" not in kwargs:
                raise
            # DCP's retry after read_metadata() failed (rank-local metadata):
            # failing again, the error would reach the ranks as an
            # AssertionError holding its text alone. Raised from
            # set_up_storage_reader instead, DCP hands it to every rank as
            # it is.
            self._failed = e
            return Metadata(state_dict_metadata={})
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
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed
        self.storage_data = metadata.storage_data
        versions = {loc.version for loc in self.storage_data.values()}
        if len(versions) != 1:
            raise MismatchError(-(_ckpt.EMISMATCH), f"DCP metadata names versions {sorted(versions)}")
        self._open(versions.pop())

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return dataclasses.replace(plan, storage_data=(self.job, self._version))

    def prepare_global_plan(self, plans: List[LoadPlan]) -> List[LoadPlan]:
        # Every rank opened its own newest version: a save that committed
        # in between would have them load different ones.
        got = [p.storage_data for p in plans]
        if len(set(got)) > 1:
            raise MismatchError(-(_ckpt.EMISMATCH), "StorageReader: the ranks opened different checkpoints (a "
                                "save committed while they opened it?): " +
                                ", ".join(f"rank {r}: job {j!r} version {v}" for r, (j, v) in enumerate(got)) +
                                "; pass checkpoint_id")
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> "Future[None]":
        from torch.distributed._shard._utils import narrow_tensor_by_index
        for req in plan.items:
            loc: ItemLocation = self.storage_data[req.storage_index]
            if req.type == LoadItemType.BYTE_IO:
                planner.load_bytes(req, io.BytesIO(bytes(self._read(loc.region, loc.nbytes))))
                continue
            target = planner.resolve_tensor(req).detach()
            if (target.device.type == "cpu" and target.is_contiguous() and not any(req.storage_offsets)
                    and tuple(req.lengths) == tuple(loc.shape) and tuple(target.shape) == tuple(loc.shape)
                    and str(target.dtype).replace("torch.", "") == loc.dtype):
                # The whole saved item into a tensor of its shape: read
                # straight into it, no buffer and no copy.
                if target.numel():
                    self._read(loc.region, loc.nbytes, into=_ct._host_buffer(target))
                planner.commit_tensor(req, target)
                continue
            saved = torch.empty(loc.shape, dtype=getattr(torch, loc.dtype))
            if saved.numel():
                self._read(loc.region, loc.nbytes, into=_ct._host_buffer(saved))
            piece = narrow_tensor_by_index(saved, req.storage_offsets, req.lengths)
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
            return checkpoint_id == "latest" or version_of(checkpoint_id) is not None
        except InvalidInputError:
            return False
