"""A nested state (dicts, lists, tuples) cut into regions and a manifest.

Array leaves (numpy arrays; torch tensors through ckpt.torch) become one
region each, read where they live. bytes-like leaves become byte regions.
Every other leaf is either kept in the manifest (None, bool, int, float,
str) or pickled, all together, into one blob region. The manifest (JSON)
records the tree, and for each array its region, dtype and shape; it is
what restore() compares the caller's state with before touching it.
"""
from __future__ import annotations

import hashlib
import json
import math
import pickle
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _ckpt
from .errors import MismatchError, PickleError, UnsupportedTypeError, InvalidInputError

MANIFEST_FORMAT = 1
HEADER = "ckpt.header"       # fixed size: magic, manifest and objects lengths
MANIFEST = "ckpt.manifest"   # JSON
OBJECTS = "ckpt.objects"     # one pickle of every object leaf
HEADER_BYTES = 64
# Arrays load() builds start on a page when they are this large: the
# library reads chunks straight into block-aligned memory (O_DIRECT).
ALIGN = 4096
ALIGN_MIN = 64 << 10
MAGIC = b"CKPTPY01"
_EINVAL = -22


@dataclass
class Leaf:
    """One array-like leaf as the C library sees it.

    ``mem`` is a writable C-contiguous buffer (host) or an int device
    address (CUDA); ``key`` identifies where the memory is, so that a leaf
    whose storage moved is registered again. ``staged`` leaves are copies
    (non-contiguous sources): ``sync_in`` refreshes the copy before a save,
    ``sync_out`` writes it back after a restore.
    """
    kind: str                 # "numpy", "torch", "bytes"
    dtype: str                # the library's dtype name ("f32", "bf16", ...)
    shape: Tuple[int, ...]
    nbytes: int
    device: int
    mem: Any
    key: Tuple
    global_shape: Tuple[int, ...] = ()
    offsets: Tuple[int, ...] = ()
    extents: Tuple[int, ...] = ()
    extra: Dict[str, Any] = field(default_factory=dict)   # kind-specific, into the manifest
    sync_in: Optional[Callable[[], None]] = None
    sync_out: Optional[Callable[[], None]] = None
    owner: Any = None         # keeps the source alive while registered
    cuda_index: Optional[int] = None  # a CUDA region's device (torch's index)


# Adapters for array types beyond numpy (ckpt.torch adds tensors).
# Each: (match(obj) -> bool, describe(obj, path) -> Leaf,
#        make(entry) -> new object for load(), meta(obj) -> manifest extras)
_adapters: List[Tuple[Callable, Callable, Callable]] = []
_adapter_kinds: Dict[str, Callable] = {}


def register_adapter(kind: str, match: Callable, describe: Callable, make: Callable) -> None:
    """Teach the state walker a new array type (used by ckpt.torch)."""
    _adapters.append((match, describe, make))
    _adapter_kinds[kind] = make


def _maybe_torch(obj) -> None:
    """Tensors in a state bring ckpt.torch in without the caller importing it."""
    mod = type(obj).__module__ or ""
    if mod.startswith("torch") and "torch" not in _adapter_kinds:
        from . import torch as _t  # noqa: F401  (registers the adapter)


# ------------------------------------------------------------------ numpy

_NP = {"bool": "bool", "int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16",
       "int32": "i32", "uint32": "u32", "int64": "i64", "uint64": "u64",
       "float16": "f16", "float32": "f32", "float64": "f64"}


def _np():
    try:
        import numpy
        return numpy
    except ImportError:
        return None


def _is_numpy(obj) -> bool:
    np = _np()
    return np is not None and isinstance(obj, np.ndarray)


def _numpy_leaf(arr, path: str) -> Optional[Leaf]:
    np = _np()
    dt = _NP.get(arr.dtype.name)
    if dt is None or not arr.dtype.isnative:
        return None  # pickled instead
    if arr.flags.c_contiguous and arr.flags.writeable:
        mem = arr.reshape(-1).view(np.uint8) if arr.ndim else arr.reshape(1).view(np.uint8)
        return Leaf("numpy", dt, tuple(arr.shape), arr.nbytes, _ckpt.DEVICE_HOST, mem,
                    ("numpy", arr.__array_interface__["data"][0], arr.nbytes, dt, arr.shape),
                    extra={"np_dtype": arr.dtype.str}, owner=arr)
    stage = np.empty(arr.shape, dtype=arr.dtype)

    def sync_in():
        np.copyto(stage, arr)

    def sync_out():
        if arr.flags.writeable:
            np.copyto(arr, stage)

    mem = stage.reshape(-1).view(np.uint8) if stage.ndim else stage.reshape(1).view(np.uint8)
    return Leaf("numpy", dt, tuple(arr.shape), arr.nbytes, _ckpt.DEVICE_HOST, mem,
                ("numpy-staged", id(stage), arr.nbytes, dt, arr.shape), extra={"np_dtype": arr.dtype.str},
                sync_in=sync_in, sync_out=sync_out, owner=(arr, stage))


def _numpy_make(entry: dict):
    np = _np()
    if np is None:
        raise UnsupportedTypeError(_EINVAL, "loading numpy arrays needs numpy")
    dt, shape = np.dtype(entry["np_dtype"]), tuple(entry["shape"])
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes < ALIGN_MIN:
        return np.empty(shape, dtype=dt)
    raw = np.empty(nbytes + ALIGN, dtype=np.uint8)  # page-aligned: see torch._make
    off = -raw.ctypes.data % ALIGN
    return raw[off:off + nbytes].view(dt).reshape(shape)


# ------------------------------------------------------------------ names

def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F").replace("\0", "%00")


class _Names:
    """Readable, unique region names from paths ("s.model.layer.0.weight")."""

    def __init__(self):
        self.used = set()

    def make(self, path: List[str]) -> str:
        base = "s." + ".".join(_escape(p) for p in path) if path else "s"
        if len(base.encode()) > 200:
            h = hashlib.sha1(base.encode()).hexdigest()[:12]
            base = base.encode()[:180].decode("utf-8", "ignore") + "~" + h
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}~{n}"
        self.used.add(name)
        return name


# ------------------------------------------------------------------ keys

def _key_out(k, objects: List[Any]):
    if isinstance(k, bool):
        objects.append(k)
        return ["o", len(objects) - 1]
    if isinstance(k, str):
        return ["s", k]
    if isinstance(k, int):
        return ["i", k]
    objects.append(k)
    return ["o", len(objects) - 1]


def _key_in(kk, objects: List[Any]):
    t, v = kk
    if t == "s":
        return v
    if t == "i":
        return int(v)
    return objects[v]


def _key_text(k) -> str:
    return str(k)


# ------------------------------------------------------------------ flatten

@dataclass
class Flat:
    tree: Any
    leaves: Dict[str, Leaf]          # region name -> leaf
    objects: List[Any]
    paths: Dict[str, str]            # region name -> path text, for messages


_INLINE = (type(None), bool, int, float, str)


def flatten(state: Any) -> Flat:
    """Walks state: the manifest tree, the array leaves, the objects."""
    if not isinstance(state, (dict, list, tuple)):
        raise UnsupportedTypeError(_EINVAL, f"state must be a dict, list or tuple, not {type(state).__name__}")
    names = _Names()
    leaves: Dict[str, Leaf] = {}
    objects: List[Any] = []
    paths: Dict[str, str] = {}
    seen = set()

    def walk(x, path: List[str]):
        if isinstance(x, (dict, list, tuple)):
            if id(x) in seen:
                raise InvalidInputError(_EINVAL, f"state: '{'/'.join(path)}' contains itself")
            seen.add(id(x))
            try:
                if isinstance(x, dict):
                    return {"t": "dict", "k": [_key_out(k, objects) for k in x.keys()],
                            "v": [walk(v, path + [_key_text(k)]) for k, v in x.items()]}
                return {"t": "list" if isinstance(x, list) else "tuple",
                        "v": [walk(v, path + [str(i)]) for i, v in enumerate(x)]}
            finally:
                seen.discard(id(x))
        ptext = "/".join(path)
        if type(x) in _INLINE and not (isinstance(x, float) and x != x):
            return {"t": "val", "v": x}
        if isinstance(x, (bytes, bytearray, memoryview)):
            name = names.make(path)
            buf = bytearray(x)
            leaves[name] = Leaf("bytes", "bytes", (), len(buf), _ckpt.DEVICE_HOST, buf, ("bytes", id(buf)),
                                owner=buf)
            paths[name] = ptext
            return {"t": "bytes", "r": name, "n": len(buf), "cls": type(x).__name__}
        _maybe_torch(x)
        for match, describe, _make in _adapters:
            if match(x):
                leaf = describe(x, ptext)
                name = names.make(path)
                leaves[name] = leaf
                paths[name] = ptext
                return _leaf_entry(name, leaf)
        if _is_numpy(x):
            leaf = _numpy_leaf(x, ptext)
            if leaf is not None:
                name = names.make(path)
                leaves[name] = leaf
                paths[name] = ptext
                return _leaf_entry(name, leaf)
        objects.append(x)
        return {"t": "obj", "i": len(objects) - 1, "path": ptext}

    try:
        tree = walk(state, [])
    finally:
        # walk reaches itself through its closure: a reference cycle that
        # would keep every leaf (and so every tensor of the state) alive
        # until the cycle collector happened to run. DCP's stagers hand over
        # a fresh copy of the state at each save, so back-to-back saves kept
        # one more state's memory each (+1 GiB of RSS per 1 GiB save) and
        # faulted every copy in anew.
        del walk
    return Flat(tree, leaves, objects, paths)


def _leaf_entry(name: str, leaf: Leaf) -> dict:
    e = {"t": "array", "kind": leaf.kind, "r": name, "dtype": leaf.dtype, "shape": list(leaf.shape),
         "nbytes": leaf.nbytes}
    if leaf.global_shape:
        e["global_shape"] = list(leaf.global_shape)
        e["offsets"] = list(leaf.offsets)
    e.update(leaf.extra)
    return e


def pickle_objects(flat: Flat) -> bytes:
    """One pickle of every object leaf; names the leaf that cannot be pickled."""
    try:
        return pickle.dumps(flat.objects, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # find which leaf, for the message
        for i, o in enumerate(flat.objects):
            try:
                pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as e2:
                raise PickleError(_EINVAL, f"state leaf '{_object_path(flat.tree, i)}' ({type(o).__name__}) "
                                           f"cannot be pickled: {e2}") from None
        raise PickleError(_EINVAL, f"the state's objects cannot be pickled: {e}") from None


def children(n: dict) -> list:
    """A manifest node's child nodes (containers only)."""
    return n["v"] if n["t"] in ("dict", "list", "tuple") else []


def _object_path(tree, idx) -> str:
    stack = [tree]
    while stack:
        n = stack.pop()
        if n.get("t") == "obj" and n.get("i") == idx:
            return n.get("path", "?")
        stack.extend(children(n))
    return "a dict key"


def manifest_bytes(flat: Flat, step: int, rank: int, world_size: int) -> bytes:
    m = {"format": MANIFEST_FORMAT, "step": step, "rank": rank, "world_size": world_size, "tree": flat.tree}
    return json.dumps(m, separators=(",", ":"), allow_nan=True).encode()


def header_bytes(manifest_len: int, objects_len: int) -> bytearray:
    h = bytearray(HEADER_BYTES)
    h[0:8] = MAGIC
    h[8:16] = manifest_len.to_bytes(8, "little")
    h[16:24] = objects_len.to_bytes(8, "little")
    return h


def parse_header(h: bytes) -> Tuple[int, int]:
    if bytes(h[0:8]) != MAGIC:
        raise MismatchError(-(_ckpt.EMISMATCH), "this version was not saved by the Python package (no ckpt.header)")
    return int.from_bytes(h[8:16], "little"), int.from_bytes(h[16:24], "little")


# ------------------------------------------------------------------ compare

def _describe(n: dict) -> str:
    t = n["t"]
    if t == "array":
        return f"{n['kind']} {n['dtype']}{n['shape']}"
    if t == "bytes":
        return f"{n['n']} bytes"
    if t in ("dict", "list", "tuple"):
        return f"{t} of {len(n['v'])}"
    return "an object" if t == "obj" else f"a {type(n.get('v')).__name__}"


def match(saved: dict, live: dict, path: str = "") -> None:
    """Raises MismatchError at the first place live differs from saved."""
    where = path or "the state"
    ts, tl = saved["t"], live["t"]
    containers = ("dict", "list", "tuple")
    if ts in containers or tl in containers:
        if ts != tl and not ({ts, tl} <= {"list", "tuple"}):
            raise MismatchError(-(_ckpt.EMISMATCH), f"{where}: saved as {_describe(saved)}, "
                                                     f"the state has {_describe(live)}")
        if ts == "dict":
            ks = [tuple(k) for k in saved["k"]]
            kl = [tuple(k) for k in live["k"]]
            if ks != kl:
                missing = [k[1] for k in ks if k not in kl][:5]
                extra = [k[1] for k in kl if k not in ks][:5]
                raise MismatchError(-(_ckpt.EMISMATCH), f"{where}: keys differ from the saved ones "
                                                         f"(missing {missing}, not saved {extra})")
            for k, a, b in zip(ks, saved["v"], live["v"]):
                match(a, b, f"{path}/{k[1]}" if path else str(k[1]))
            return
        if len(saved["v"]) != len(live["v"]):
            raise MismatchError(-(_ckpt.EMISMATCH), f"{where}: saved with {len(saved['v'])} items, "
                                                     f"the state has {len(live['v'])}")
        for i, (a, b) in enumerate(zip(saved["v"], live["v"])):
            match(a, b, f"{path}/{i}" if path else str(i))
        return
    if ts == "array" or tl == "array":
        if ts != tl:
            raise MismatchError(-(_ckpt.EMISMATCH), f"{where}: saved as {_describe(saved)}, "
                                                     f"the state has {_describe(live)}")
        if saved["dtype"] != live["dtype"] or saved["shape"] != live["shape"]:
            raise MismatchError(-(_ckpt.EMISMATCH), f"{where}: saved as {saved['dtype']}{saved['shape']}, "
                                                     f"the state has {live['dtype']}{live['shape']}")
        return
    # bytes and objects are replaced, whatever the state held there


def walk_pairs(saved: dict, live: dict, fn) -> None:
    """Calls fn(saved_node, live_node) for every array leaf pair (after match)."""
    if saved["t"] in ("dict", "list", "tuple"):
        for a, b in zip(saved["v"], live["v"]):
            walk_pairs(a, b, fn)
    elif saved["t"] == "array":
        fn(saved, live)


# ------------------------------------------------------------------ rebuild

def assign(state: Any, saved: dict, blobs: Dict[str, bytes], objects: List[Any]) -> Any:
    """Puts restored objects and bytes into state's containers (in place for
    dicts and lists; tuples are rebuilt). Returns the node's new value."""
    t = saved["t"]
    if t == "dict":
        for kk, v in zip(saved["k"], saved["v"]):
            k = _key_in(kk, objects)
            nv = assign(state[k], v, blobs, objects)
            if nv is not state[k]:
                state[k] = nv
        return state
    if t in ("list", "tuple"):
        items = list(state)
        changed = False
        for i, v in enumerate(saved["v"]):
            nv = assign(items[i], v, blobs, objects)
            if nv is not items[i]:
                items[i] = nv
                changed = True
        if not changed:
            return state
        if isinstance(state, list):
            state[:] = items
            return state
        return type(state)(items) if type(state) is tuple else type(state)(*items)
    if t == "val":
        return saved["v"]
    if t == "obj":
        return objects[saved["i"]]
    if t == "bytes":
        b = blobs[saved["r"]]
        return bytearray(b) if saved.get("cls") == "bytearray" else bytes(b)
    return state  # arrays were restored in place


def build(saved: dict, arrays: Dict[str, Any], blobs: Dict[str, bytes], objects: List[Any]) -> Any:
    """A new tree from the manifest (load())."""
    t = saved["t"]
    if t == "dict":
        return {_key_in(kk, objects): build(v, arrays, blobs, objects) for kk, v in zip(saved["k"], saved["v"])}
    if t == "list":
        return [build(v, arrays, blobs, objects) for v in saved["v"]]
    if t == "tuple":
        return tuple(build(v, arrays, blobs, objects) for v in saved["v"])
    if t == "val":
        return saved["v"]
    if t == "obj":
        return objects[saved["i"]]
    if t == "bytes":
        b = blobs[saved["r"]]
        return bytearray(b) if saved.get("cls") == "bytearray" else bytes(b)
    return arrays[saved["r"]]


def make_array(entry: dict):
    """An empty array for a manifest entry, of the kind it was saved as when
    that kind is importable (torch tensors as CPU tensors), else numpy."""
    kind = entry["kind"]
    if kind == "torch" and "torch" not in _adapter_kinds:
        try:
            from . import torch as _t  # noqa: F401
        except ImportError:
            pass
    if kind in _adapter_kinds:
        return _adapter_kinds[kind](entry)
    if "np_dtype" not in entry:
        np = _np()
        if np is None or entry["dtype"] in ("bf16", "f8e4m3", "f8e5m2"):
            raise UnsupportedTypeError(_EINVAL, f"loading {entry['kind']} {entry['dtype']} arrays needs "
                                                f"{entry['kind']}")
        inv = {v: k for k, v in _NP.items()}
        entry = dict(entry, np_dtype=np.dtype(inv[entry["dtype"]]).str)
    return _numpy_make(entry)


def unpickle(data: bytes) -> List[Any]:
    try:
        objs = pickle.loads(data) if data else []
    except Exception as e:
        raise PickleError(_EINVAL, f"the saved objects cannot be unpickled: {e}") from None
    if not isinstance(objs, list):
        raise PickleError(_EINVAL, "the saved objects are not what ckpt wrote")
    return objs
