"""ckpt.Checkpointer: save, restore and load nested states through libckpt."""
from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _ckpt, _settings, _state
from .errors import ClosedError, CorruptError, Error, InvalidInputError, MismatchError, NoVersionError

log = logging.getLogger("ckpt")

TIERS = {"local_mem": _ckpt.TIER_LOCAL_MEM, "peer_mem": _ckpt.TIER_PEER_MEM,
         "local_disk": _ckpt.TIER_LOCAL_DISK, "shared": _ckpt.TIER_SHARED}
_ACTIONS = {_ckpt.STEP_CONTINUE: "continue", _ckpt.STEP_SAVE: "save", _ckpt.STEP_EXIT: "exit"}
_EINVAL = -22
_open_roots: "collections.Counter[str]" = collections.Counter()
_roots_lock = threading.Lock()


def open_roots() -> set:
    """Real paths of the roots this process has a Checkpointer open on."""
    with _roots_lock:
        return {r for r, n in _open_roots.items() if n > 0}


@dataclass(frozen=True)
class SaveStatus:
    """A save's result at one tier (ckpt_status)."""
    version: int
    tier: str
    committed: bool       # every rank's shard durable: restorable
    bytes: int            # raw bytes of this rank's shard
    stored_bytes: int     # bytes written (after compression)
    stall_s: float        # time save() blocked
    durable_s: float      # from save() to durable and indexed


@dataclass(frozen=True)
class VersionInfo:
    """One version of the job (ckpt_version_info)."""
    version: int
    state: str            # "PENDING", "COMMITTED", "DELETING"
    world_size: int
    shards_done: int
    bytes: int
    stored_bytes: int
    created_ns: int
    committed_ns: int


def cuda_device_of(leaves, bound: Optional[int]) -> Optional[int]:
    """The one CUDA device whose memory the leaves' CUDA regions are (None:
    no CUDA region). The library snapshots one device, the one current when
    its first CUDA region was added (bound, once there was one)."""
    devs = sorted({leaf.cuda_index for leaf in leaves if leaf.device == _ckpt.DEVICE_CUDA})
    if not devs:
        return None
    if len(devs) > 1:
        raise InvalidInputError(_EINVAL, f"the state holds CUDA tensors on devices {', '.join(map(str, devs))}: "
                                         f"a Checkpointer takes one device's (move the others to it or to the CPU)")
    if bound is not None and devs[0] != bound:
        raise InvalidInputError(_EINVAL, f"the state's CUDA tensors are on device {devs[0]}, but this "
                                         f"Checkpointer's are on device {bound} (the library keeps the device "
                                         f"of its first CUDA region)")
    return devs[0]


def _tier(t: Union[str, int]) -> int:
    if isinstance(t, int) and t in TIERS.values():
        return t
    if isinstance(t, str) and t in TIERS:
        return TIERS[t]
    raise InvalidInputError(_EINVAL, f"unknown tier {t!r}: one of {', '.join(TIERS)}")


def _status(d: dict) -> SaveStatus:
    name = next((k for k, v in TIERS.items() if v == d["tier"]), str(d["tier"]))
    return SaveStatus(d["version"], name, d["committed"], d["bytes"], d["stored_bytes"],
                      d["stall_ns"] / 1e9, d["durable_ns"] / 1e9)


class SaveHandle:
    """A save in progress: returned by Checkpointer.save() once the snapshot
    is taken; the state may then be modified (after fence() for lazy saves
    of CUDA tensors)."""

    def __init__(self, h, version: int):
        self._h = h
        self.version = version

    def wait(self, tier: Union[str, int] = "local_disk", timeout: Optional[float] = None) -> SaveStatus:
        """Blocks (without the GIL) until the save is durable at tier; raises
        the save's error, or WaitTimeoutError after timeout seconds."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        return _status(self._h.wait(_tier(tier), ms))

    def done(self, tier: Union[str, int] = "local_disk") -> bool:
        """True once the save is durable at tier; raises if it failed."""
        return self._h.test(_tier(tier)) is not None

    def __repr__(self) -> str:
        return f"<ckpt.SaveHandle version={self.version}>"


class Checkpointer:
    """Checkpoints of one rank's state, through libckpt.

    ``job`` names the training run; ``root`` the checkpoint directory
    (else CKPT_ROOT). ``rank`` and ``world_size`` default to CKPT_RANK /
    CKPT_WORLD_SIZE, then to an initialised torch.distributed group or
    torchrun's RANK / WORLD_SIZE. Every other library setting (ckpt.h's
    ckpt_config, ``ckpt.config_help()``) may be passed by name:
    ``staging_bytes="1G"``, ``compress=True``, ``interval=50``, ...
    """

    def __init__(self, job: str, root: Optional[str] = None, *, rank: Optional[int] = None,
                 world_size: Optional[int] = None, **settings: Any):
        cfg = _settings.resolve(job, root, rank, world_size, settings)
        self.job = job
        self.rank = int(cfg.get("rank", "0")) if "rank" in cfg else None
        # What another process needs to open its own (DCP's process executor).
        self.open_args = (job, root, dict(settings))
        self._lock = threading.RLock()
        self._registered: Dict[str, _state.Leaf] = {}
        self._cuda_dev: Optional[int] = None  # the device of the library's CUDA regions
        self._pool_warned = False
        self._ctx = _ckpt.Context(cfg)
        root_path = cfg.get("root") or os.environ.get("CKPT_ROOT")
        self._root = os.path.realpath(root_path) if root_path else None
        if self._root:
            with _roots_lock:
                _open_roots[self._root] += 1

    # -------------------------------------------------------------- life

    def __enter__(self) -> "Checkpointer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Waits for pending saves to persist, then frees everything. Idempotent."""
        with self._lock:
            was_open = not self._ctx.closed
            try:
                with self._scope(self._cuda_dev):
                    self._ctx.close()  # lazy CUDA copies may read the tensors until then
            finally:
                self._registered.clear()
                if was_open and self._root:
                    with _roots_lock:
                        _open_roots[self._root] -= 1

    def __del__(self):
        try:
            if not self._ctx.closed:
                self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return self._ctx.closed

    def _check_open(self, what: str) -> None:
        if self._ctx.closed:
            raise ClosedError(-(_ckpt.ESTATE), f"{what}: the Checkpointer is closed")

    # -------------------------------------------------------------- regions

    @staticmethod
    def _scope(index: Optional[int]):
        """CUDA device index current for the block (nothing without one)."""
        if index is None:
            return contextlib.nullcontext()
        from .torch import device_scope
        return device_scope(index)

    def _sync(self, want: Dict[str, _state.Leaf]) -> None:
        """Makes the registered regions exactly want: a leaf whose memory
        moved (storage, pointer, size, dtype) is registered again."""
        for name in list(self._registered):
            if name not in want or self._registered[name].key != want[name].key:
                self._ctx.region_remove(name)
                del self._registered[name]
        for name, leaf in want.items():
            if name in self._registered:
                self._registered[name] = leaf  # same memory; keep the newest owner
                continue
            self._ctx.region_add(name, leaf.mem, leaf.nbytes, _ckpt.DTYPES[leaf.dtype][0], leaf.device,
                                 leaf.global_shape, leaf.offsets, leaf.extents)
            self._registered[name] = leaf
            if leaf.device == _ckpt.DEVICE_CUDA and self._cuda_dev is None:
                self._cuda_dev = leaf.cuda_index

    def _release_regions(self) -> None:
        """Unregisters every region and drops the references to their
        memory. For callers whose state is a fresh copy at each save (DCP's
        stagers): holding the last copy until the next save keeps the
        allocator from reusing its memory, so every copy is faulted in anew
        (DCP's staging took 1.0 s instead of 0.37 s for 1 GiB)."""
        with self._lock:
            for name in list(self._registered):
                self._ctx.region_remove(name)
            self._registered.clear()

    def _only(self, name: str, buf: bytearray) -> None:
        leaf = _state.Leaf("bytes", "bytes", (), len(buf), _ckpt.DEVICE_HOST, buf, ("meta", id(buf)), owner=buf)
        self._sync({name: leaf})

    # -------------------------------------------------------------- save

    def save(self, step: int, state: Any, *, lazy: bool = False) -> SaveHandle:
        """Takes a checkpoint of state as version ``step``; returns once the
        snapshot is taken (the rest persists in the background).

        state: nested dicts/lists/tuples of tensors (CPU or CUDA), numpy
        arrays, bytes, and picklable objects. lazy: CUDA tensors' copies are
        only queued; call fence() before modifying them.
        """
        if not isinstance(step, int) or step < 0 or step >= _ckpt.LATEST:
            raise InvalidInputError(_EINVAL, f"step must be an int in [0, 2**64-1), not {step!r}")
        with self._lock:
            self._check_open("save")
            flat = _state.flatten(state)
            objs = _state.pickle_objects(flat)
            man = _state.manifest_bytes(flat, step, self.rank or 0, 0)
            want = dict(flat.leaves)
            for name, data in ((_state.HEADER, _state.header_bytes(len(man), len(objs))),
                               (_state.MANIFEST, bytearray(man)), (_state.OBJECTS, bytearray(objs))):
                want[name] = _state.Leaf("bytes", "bytes", (), len(data), _ckpt.DEVICE_HOST, data,
                                         ("meta", name, id(data)), owner=data)
            cuda = cuda_device_of(flat.leaves.values(), self._cuda_dev)
            with self._scope(cuda if cuda is not None else self._cuda_dev):
                for leaf in flat.leaves.values():
                    if leaf.sync_in:
                        leaf.sync_in()
                if cuda is not None:  # the snapshot follows the work queued on torch's current stream
                    from .torch import current_stream_handle
                    self._ctx.cuda_stream_set(current_stream_handle(cuda))
                self._sync(want)
                handle = SaveHandle(self._ctx.save(step, lazy), step)
            self._warn_streamed()
            return handle

    def _warn_streamed(self) -> None:
        """Once per Checkpointer: a save that did not fit the staging pool
        streamed through it, waiting for the disk (the library logs it on
        stderr too, where a notebook or a job's log may hide it)."""
        if self._pool_warned:
            return
        pool, need = self._ctx.staging_size()
        if need > pool:
            self._pool_warned = True
            msg = (f"ckpt: this save staged {need / 2**20:.4g} MiB through a staging pool of {pool / 2**20:.4g} "
                   f"MiB, so save() waited for the disk; pass staging_bytes=\"{-(-need // 2**20)}M\" (or set "
                   f"CKPT_STAGING_BYTES) for saves that only copy")
            warnings.warn(msg, RuntimeWarning, stacklevel=3)
            log.warning("%s", msg)

    def fence(self) -> None:
        """Waits until lazy saves' device copies are done: CUDA tensors may
        be modified after it (call it before optimizer.step())."""
        with self._lock:
            self._check_open("fence")
            with self._scope(self._cuda_dev):
                self._ctx.fence()

    # -------------------------------------------------------------- restore

    def _read_meta(self, version: int):
        """(version, manifest, objects length) of version (LATEST: the newest
        one the library finds restorable)."""
        hdr = bytearray(_state.HEADER_BYTES)
        self._only(_state.HEADER, hdr)
        v = self._ctx.restore(version)
        mlen, olen = _state.parse_header(hdr)
        man = bytearray(mlen)
        self._only(_state.MANIFEST, man)
        self._ctx.restore(v)
        import json
        try:
            m = json.loads(bytes(man))
        except ValueError as e:
            raise CorruptError(-(_ckpt.ECORRUPT), f"version {v}: the manifest is not JSON: {e}") from None
        if m.get("format") != _state.MANIFEST_FORMAT:
            raise MismatchError(-(_ckpt.EMISMATCH), f"version {v}: manifest format {m.get('format')} "
                                                     f"is not {_state.MANIFEST_FORMAT}")
        return v, m, olen

    def _candidates(self, version: Union[str, int]) -> List[int]:
        if version == "latest":
            return [_ckpt.LATEST]
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidInputError(_EINVAL, f"version must be 'latest' or an int >= 0, not {version!r}")
        return [version]

    def _older(self, than: int, tried: set) -> Optional[int]:
        """The newest version below than that a restore of the newest would
        try (the coordinator's, this root's and the SHARED tier's)."""
        olds = [v for v in self._ctx.restorable() if v < than and v not in tried]
        return max(olds) if olds else None

    def _attempts(self, version, body):
        """Runs body(v) for the version asked for; for 'latest', falls back
        to older versions (with a warning) when one turns out corrupt."""
        first = self._candidates(version)[0]
        tried: set = set()
        v = first
        while True:
            try:
                return body(v)
            except (CorruptError, NoVersionError) as e:
                if version != "latest":
                    raise
                if isinstance(e, NoVersionError) and v == _ckpt.LATEST and getattr(e, "version", None) is None:
                    return None  # no version at all (not: the newest one found could not be read)
                bad = v if v != _ckpt.LATEST else (max(tried) if tried else None)
                cur = getattr(e, "version", bad)
                if cur is None:
                    raise
                tried.add(cur)
                nxt = self._older(cur, tried)
                msg = f"ckpt: version {cur} cannot be restored ({e.message}); "
                if nxt is None:
                    warnings.warn(msg + "no older version is left", RuntimeWarning, stacklevel=3)
                    raise NoVersionError(-(_ckpt.ENOVERSION), f"no restorable version: the newest, {cur}, "
                                                              f"failed: {e.message}") from e
                warnings.warn(msg + f"falling back to version {nxt}", RuntimeWarning, stacklevel=3)
                log.warning("%sfalling back to version %d", msg, nxt)
                v = nxt

    def restore(self, state: Any, version: Union[str, int] = "latest") -> Optional[int]:
        """Restores version (the newest restorable one by default) into
        state: tensors and arrays in place, objects and bytes replaced in
        their dicts and lists. Returns the version, or None when there is
        none. The state is compared with what was saved (keys, dtypes,
        shapes) before anything in it is touched: MismatchError names the
        first difference."""
        with self._lock:
            self._check_open("restore")
            live = _state.flatten(state)
            cuda = cuda_device_of(live.leaves.values(), self._cuda_dev)
            with self._scope(cuda if cuda is not None else self._cuda_dev):
                if cuda is not None:  # work queued on the tensors first: the copies do not wait for it
                    from .torch import synchronize
                    synchronize(cuda)
                return self._attempts(version, lambda v: self._restore_one(state, live, v))

    def _restore_one(self, state, live, version: int) -> int:
        v, m, olen = self._guard(version, lambda: self._read_meta(version))
        saved = m["tree"]
        _state.match(saved, live.tree)
        # The live leaves under the names they were saved with.
        by_saved: Dict[str, _state.Leaf] = {}
        _state.walk_pairs(saved, live.tree, lambda s, l: by_saved.__setitem__(s["r"], live.leaves[l["r"]]))
        want: Dict[str, _state.Leaf] = dict(by_saved)
        blobs = self._blob_buffers(saved, want)
        objs = bytearray(olen)
        want[_state.OBJECTS] = _state.Leaf("bytes", "bytes", (), olen, _ckpt.DEVICE_HOST, objs,
                                           ("meta", _state.OBJECTS, id(objs)), owner=objs)
        self._guard(v, lambda: self._sync_restore(want, v))
        for leaf in by_saved.values():
            if leaf.sync_out:
                leaf.sync_out()
        objects = _state.unpickle(bytes(objs))
        _state.assign(state, saved, {k: bytes(b) for k, b in blobs.items()}, objects)
        return v

    def _sync_restore(self, want, v):
        self._sync(want)
        self._ctx.restore(v)

    def _guard(self, v, fn):
        """Tags a corrupt/missing error with the version it hit."""
        try:
            return fn()
        except (CorruptError, NoVersionError) as e:
            if v != _ckpt.LATEST:
                e.version = v
            raise

    def _blob_buffers(self, saved: dict, want: Dict[str, _state.Leaf]) -> Dict[str, bytearray]:
        blobs: Dict[str, bytearray] = {}
        stack = [saved]
        while stack:
            n = stack.pop()
            if n["t"] == "bytes":
                b = bytearray(n["n"])
                blobs[n["r"]] = b
                want[n["r"]] = _state.Leaf("bytes", "bytes", (), n["n"], _ckpt.DEVICE_HOST, b,
                                           ("bytes", id(b)), owner=b)
            stack.extend(_state.children(n))
        return blobs

    def load(self, version: Union[str, int] = "latest") -> Any:
        """A new state built from version: tensors as new CPU tensors (numpy
        arrays when torch is not installed), objects unpickled. None when
        there is no version."""
        with self._lock:
            self._check_open("load")
            with self._scope(self._cuda_dev):  # CUDA regions are removed on the way
                return self._attempts(version, self._load_one)

    def _load_one(self, version: int):
        v, m, olen = self._guard(version, lambda: self._read_meta(version))
        saved = m["tree"]
        want: Dict[str, _state.Leaf] = {}
        arrays: Dict[str, Any] = {}
        stack = [saved]
        while stack:
            n = stack.pop()
            if n["t"] == "array":
                arr = _state.make_array(n)
                arrays[n["r"]] = arr
                flat = _state.flatten([arr])
                leaf = next(iter(flat.leaves.values()))
                want[n["r"]] = leaf
            stack.extend(_state.children(n))
        blobs = self._blob_buffers(saved, want)
        objs = bytearray(olen)
        want[_state.OBJECTS] = _state.Leaf("bytes", "bytes", (), olen, _ckpt.DEVICE_HOST, objs,
                                           ("meta", _state.OBJECTS, id(objs)), owner=objs)
        self._guard(v, lambda: self._sync_restore(want, v))
        objects = _state.unpickle(bytes(objs))
        return _state.build(saved, arrays, {k: bytes(b) for k, b in blobs.items()}, objects)

    # -------------------------------------------------------------- loop

    def step(self, n: int) -> str:
        """Call once per training step, after the optimizer update: returns
        "save" when the interval setting or a preemption asks for a
        checkpoint of this step, "exit" once an emergency checkpoint is
        committed (leave now), else "continue"."""
        self._check_open("step")
        return _ACTIONS[self._ctx.step(n)]

    def install_preemption_handlers(self, signals: Optional[Sequence[int]] = None) -> None:
        """Arms SIGTERM/SIGUSR1 (or signals): a signal makes the next step()
        answer "save", then "exit" once that version is durable."""
        with self._lock:
            self._check_open("install_preemption_handlers")
            self._ctx.preempt_install(None if signals is None else [int(s) for s in signals])

    def preempt_notice(self, deadline_ns: int = 0) -> None:
        """The notice a signal would raise, from the caller (a preStop hook)."""
        self._check_open("preempt_notice")
        self._ctx.preempt_notice(deadline_ns)

    def versions(self) -> List[VersionInfo]:
        """The job's versions, oldest first."""
        self._check_open("versions")
        return [VersionInfo(**d) for d in self._ctx.versions()]

    def delete(self, version: int) -> None:
        """Deletes a version from the root, crash-safely (ckpt_version_delete):
        NoVersionError if there is none; not while its save is in flight;
        with a ckptd agent, SystemCallError (ENOTSUP): the coordinator deletes."""
        if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version < _ckpt.LATEST:
            raise InvalidInputError(_EINVAL, f"version must be an int >= 0, not {version!r}")
        with self._lock:
            self._check_open("delete")
            self._ctx.version_delete(version)

    def latest(self) -> Optional[int]:
        """The newest COMMITTED version, or None."""
        c = [v.version for v in self.versions() if v.state == "COMMITTED"]
        return max(c) if c else None

    def __repr__(self) -> str:
        return f"<ckpt.Checkpointer job={self.job!r}{' closed' if self.closed else ''}>"
