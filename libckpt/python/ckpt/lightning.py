"""PyTorch Lightning checkpoints through ckpt: ``ckpt.lightning.CheckpointIO``.

    import pytorch_lightning as pl
    import ckpt.lightning

    trainer = pl.Trainer(plugins=[ckpt.lightning.CheckpointIO(root="/nvme/ckpt")],
                         callbacks=[pl.callbacks.ModelCheckpoint(dirpath="ckpts", save_last=True)])
    trainer.fit(model, data, ckpt_path="last")

Each checkpoint Lightning saves (ModelCheckpoint's, ``trainer.save_checkpoint``)
is one ckpt version of the job: its tensors are regions, copied into the
staging pool before save_checkpoint returns (training goes on while the
version is checksummed, written and committed, as with Lightning's
AsyncCheckpointIO, without a copy of every tensor made by Python first).
Once the version is committed, a small pointer file appears at the path
Lightning named (``epoch=3-step=400.ckpt``, ``last.ckpt``): JSON naming the
root, the job and the version. So ModelCheckpoint's bookkeeping (top-k,
``last``, ``ckpt_path="last"``, which looks for those files) works as it
does with files, a pointer never names a version that is not complete, and
``remove_checkpoint`` (a checkpoint leaving the top k, a ``last.ckpt``
replaced) deletes the pointer, then the version once no pointer of that
folder names it. ``load_checkpoint`` of a pointer loads its version; of
any other file, ``torch.load`` (checkpoints written before).

Lightning saves on the global rank 0 only (the state is replicated under
DDP), so the version is a one-rank save (rank 0 of world size 1), whatever
the job's world size, and every rank that loads reads it; the root must be
one every rank can read (a node's local disk serves one node).
"""
from __future__ import annotations

import json
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

try:
    from lightning_fabric.plugins.io.checkpoint_io import CheckpointIO as _Base
except ImportError:  # the unified "lightning" package only
    from lightning.fabric.plugins.io.checkpoint_io import CheckpointIO as _Base

from . import _ckpt
from .checkpointer import Checkpointer
from .errors import InvalidInputError, NoVersionError

POINTER_FORMAT = "ckpt-lightning-pointer"
_EINVAL = -22


def read_pointer(path: str) -> Optional[Dict[str, Any]]:
    """The pointer file at path as a dict, or None when path is another
    kind of file (a checkpoint torch.save wrote)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4097)
    except IsADirectoryError:
        return None
    if len(head) > 4096 or not head.lstrip().startswith(b"{"):
        return None
    try:
        p = json.loads(head)
    except ValueError:
        return None
    if not isinstance(p, dict) or p.get("format") != POINTER_FORMAT:
        return None
    if not isinstance(p.get("version"), int) or not isinstance(p.get("job"), str) or \
            not isinstance(p.get("root"), str):
        raise InvalidInputError(_EINVAL, f"{path}: a ckpt pointer without root, job and version: {p}")
    return p


def _write_pointer(path: str, pointer: Dict[str, Any]) -> None:
    """Writes the pointer at path atomically and durably: a temp file,
    fsync, rename, fsync of the folder."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{os.path.basename(path)}.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(pointer, f)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(d)


def _fsync_dir(d: str) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move(obj: Any, where: Any) -> Any:
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.to(where)
    if isinstance(obj, dict):
        return type(obj)((k, _move(v, where)) for k, v in obj.items()) if type(obj) is not dict else \
            {k: _move(v, where) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_move(v, where) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_move(v, where) for v in obj)
    return obj


class CheckpointIO(_Base):
    """Lightning's CheckpointIO over ckpt (module docstring).

    root: the checkpoint root (else CKPT_ROOT, else a folder ``.ckpt`` beside
    the first checkpoint Lightning saves); job: the job id ("lightning");
    tier: what a save waits for before its pointer is written
    ("local_disk"); every other keyword is a ckpt setting
    (``chunk_bytes="8M"``, ``compress=True``, ...).
    """

    def __init__(self, root: Optional[str] = None, job: str = "lightning", *, tier: str = "local_disk",
                 **settings: Any):
        super().__init__()
        self.root = root if root is not None else os.environ.get("CKPT_ROOT")
        self.job = job
        self.tier = tier
        self.settings = settings
        self._cks: Dict[Tuple[str, str], Checkpointer] = {}
        self._lock = threading.Lock()
        self._executor: Optional[ThreadPoolExecutor] = None
        self._pending: List[Future] = []
        self._error: Optional[BaseException] = None
        self._next = 0  # the lowest version a new save may take
        self._written: set = set()  # (real root, job) this plugin saved into: the only versions it deletes

    # -------------------------------------------------------------- helpers

    def _checkpointer(self, root: str, job: str) -> Checkpointer:
        key = (os.path.realpath(root), job)
        with self._lock:
            ck = self._cks.get(key)
            if ck is None or ck.closed:
                # Lightning saves on global rank 0 alone: a one-rank version.
                ck = self._cks[key] = Checkpointer(job, root, rank=0, world_size=1, **self.settings)
            return ck

    def _drain(self) -> None:
        """Waits for the saves in flight; raises the first error one hit."""
        pending, self._pending = self._pending, []
        for f in pending:
            f.result()
        self._raise()

    def _raise(self) -> None:
        err, self._error = self._error, None
        if err is not None:
            raise err

    def _still_named(self, folder: str, root: str, job: str, version: int, but: str) -> bool:
        """True when a pointer in folder other than `but` names the version."""
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return False
        for n in names:
            p = os.path.join(folder, n)
            if not n.endswith(".ckpt") or os.path.abspath(p) == os.path.abspath(but) or not os.path.isfile(p):
                continue
            try:
                q = read_pointer(p)
            except (OSError, InvalidInputError):
                continue
            if q and q["version"] == version and q["job"] == job and \
                    os.path.realpath(q["root"]) == os.path.realpath(root):
                return True
        return False

    def _forget(self, old: Optional[Dict[str, Any]], path: str) -> None:
        """Deletes the version a pointer that is gone named, unless another
        pointer beside it still names it."""
        if not old:
            return
        if (os.path.realpath(old["root"]), old["job"]) not in self._written:
            # A pointer this plugin did not write (copied in, another job's):
            # its version is not ours to delete.
            return
        folder = os.path.dirname(os.path.abspath(path))
        if self._still_named(folder, old["root"], old["job"], old["version"], but=path):
            return
        try:
            self._checkpointer(old["root"], old["job"]).delete(old["version"])
        except NoVersionError:
            pass  # deleted already (by a retention rule, by hand)

    # -------------------------------------------------------------- CheckpointIO

    def save_checkpoint(self, checkpoint: Dict[str, Any], path, storage_options: Optional[Any] = None) -> None:
        if storage_options is not None:
            raise TypeError(f"ckpt.lightning.CheckpointIO.save_checkpoint takes no storage_options "
                            f"({storage_options!r}): pass ckpt settings to CheckpointIO(...)")
        self._raise()
        path = os.fspath(path)
        root = self.root or os.path.join(os.path.dirname(os.path.abspath(path)), ".ckpt")
        root = os.path.abspath(root)
        ck = self._checkpointer(root, self.job)
        self._written.add((os.path.realpath(root), self.job))
        vs = ck.versions()
        version = max([self._next] + [v.version + 1 for v in vs]) if vs or self._next else 1
        self._next = version + 1
        handle = ck.save(version, checkpoint)  # returns once the tensors are copied
        pointer = {"format": POINTER_FORMAT, "root": root, "job": self.job, "version": version,
                   "global_step": checkpoint.get("global_step"), "epoch": checkpoint.get("epoch")}

        def finish() -> None:
            try:
                st = handle.wait(self.tier)
                if not st.committed:
                    raise NoVersionError(-(_ckpt.ENOVERSION), f"version {version} is durable but not committed")
                try:
                    old = read_pointer(path) if os.path.exists(path) else None
                except (OSError, InvalidInputError):
                    old = None
                _write_pointer(path, pointer)
                if old and (old["version"], old["job"]) != (version, self.job):
                    self._forget(old, path)  # a replaced last.ckpt: its version goes
            except BaseException as e:
                self._error = self._error or e

        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckpt-lightning")
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._executor.submit(finish))

    def load_checkpoint(self, path, map_location: Optional[Any] = None,
                        weights_only: Optional[bool] = None) -> Dict[str, Any]:
        self._drain()
        path = os.fspath(path)
        p = read_pointer(path)
        if p is None:  # a checkpoint of Lightning's own (torch.save)
            import torch
            return torch.load(path, map_location=map_location,
                              weights_only=bool(weights_only) if weights_only is not None else False)
        try:
            sd = self._checkpointer(p["root"], p["job"]).load(p["version"])
        except NoVersionError as e:
            raise NoVersionError(e.code, f"{path} names version {p['version']} of job '{p['job']}' in "
                                         f"{p['root']}, which is not there ({e.message})") from None
        if sd is None:
            raise NoVersionError(-(_ckpt.ENOVERSION), f"{path}: no version {p['version']} of job '{p['job']}' "
                                                      f"in {p['root']}")
        if map_location is not None:
            if callable(map_location) or isinstance(map_location, dict):
                raise InvalidInputError(_EINVAL, "ckpt.lightning: map_location must be a device or a str")
            sd = _move(sd, map_location)
        return sd

    def remove_checkpoint(self, path) -> None:
        self._drain()
        path = os.fspath(path)
        if not os.path.lexists(path):
            return
        try:
            p = read_pointer(path) if not os.path.islink(path) else None
        except InvalidInputError:
            p = None
        os.remove(path)
        _fsync_dir(os.path.dirname(os.path.abspath(path)))
        self._forget(p, path)

    def teardown(self) -> None:
        try:
            self._drain()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            with self._lock:
                cks, self._cks = list(self._cks.values()), {}
            for ck in cks:
                ck.close()


# Lightning's two packages (pytorch_lightning's lightning_fabric, and the
# unified lightning) each check plugins against their own CheckpointIO.
try:
    from lightning.fabric.plugins.io.checkpoint_io import CheckpointIO as _Other
    if _Other is not _Base:
        _Other.register(CheckpointIO)
except ImportError:
    pass
