"""ckpt.torch: torch tensors in a Checkpointer's state, and
torch.distributed.checkpoint's StorageWriter / StorageReader over ckpt.

Importing it teaches ckpt.Checkpointer tensors (a state holding tensors
imports it by itself). A tensor is read where it lives: a contiguous CPU
tensor's memory is the region, a CUDA tensor's device memory is a CUDA
region when the library has CUDA (else it is staged through host memory);
a non-contiguous tensor is copied into a buffer of its own at each save.
DTensors save their local shard with the global shape and this rank's
offsets (so ckpt's own resharding can use them).
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import torch

from . import _ckpt, _state
from .errors import UnsupportedTypeError

_EINVAL = -22

DTYPES = {
    torch.bool: "bool", torch.uint8: "u8", torch.int8: "i8", torch.int16: "i16", torch.int32: "i32",
    torch.int64: "i64", torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
    torch.float64: "f64",
}
for _n, _c in (("uint16", "u16"), ("uint32", "u32"), ("uint64", "u64"), ("float8_e4m3fn", "f8e4m3"),
               ("float8_e5m2", "f8e5m2")):
    if hasattr(torch, _n):
        DTYPES[getattr(torch, _n)] = _c


def _dtensor_cls():
    try:
        from torch.distributed.tensor import DTensor
        return DTensor
    except Exception:
        return None


_DTensor = _dtensor_cls()


def _host_buffer(t: torch.Tensor):
    """A writable buffer over a contiguous CPU tensor's bytes (no copy)."""
    n = t.numel() * t.element_size()
    if n == 0:
        return bytearray(0)
    return (ctypes.c_uint8 * n).from_address(t.data_ptr())


def _shard_info(x):
    """(local tensor, global shape, offsets) of a DTensor, else (x, (), ())."""
    if _DTensor is not None and isinstance(x, _DTensor):
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
        local = x.to_local()
        shape, offs = compute_local_shape_and_global_offset(x.shape, x.device_mesh, x.placements)
        return local, tuple(int(s) for s in x.shape), tuple(int(o) for o in offs)
    return x, (), ()


def _describe(x: torch.Tensor, path: str) -> _state.Leaf:
    t, gshape, offs = _shard_info(x)
    t = t.detach()
    dt = DTYPES.get(t.dtype)
    if dt is None or t.is_quantized or t.is_sparse or t.layout != torch.strided:
        raise UnsupportedTypeError(_EINVAL, f"state leaf '{path}': tensors of {t.dtype} ({t.layout}) are not "
                                            f"supported (bool, integers, float16/bfloat16/32/64, float8)")
    nbytes = t.numel() * t.element_size()
    shape = tuple(t.shape)
    extra = {"torch_dtype": str(t.dtype).replace("torch.", "")}
    if gshape:
        extra["dtensor"] = True
    exts = shape if gshape else ()
    # An empty CUDA tensor has no device address (data_ptr 0), which the
    # library refuses as a CUDA region: it takes the (empty) host path.
    cuda = t.is_cuda and _ckpt.cuda_available() and nbytes > 0
    if t.is_cuda and not cuda:
        # The library has no CUDA: through host memory.
        stage = torch.empty(shape, dtype=t.dtype, device="cpu", pin_memory=torch.cuda.is_available())
        return _state.Leaf("torch", dt, shape, nbytes, _ckpt.DEVICE_HOST, _host_buffer(stage),
                           ("torch-staged", id(stage), nbytes, dt, shape), gshape, offs, exts, extra,
                           sync_in=lambda: stage.copy_(t), sync_out=lambda: t.copy_(stage), owner=(t, stage))
    index = t.device.index if cuda else None
    if t.is_contiguous():
        key = ("torch", str(t.device), t.data_ptr(), nbytes, dt, shape)
        if cuda:
            return _state.Leaf("torch", dt, shape, nbytes, _ckpt.DEVICE_CUDA, t.data_ptr(), key, gshape, offs,
                               exts, extra, owner=t, cuda_index=index)
        return _state.Leaf("torch", dt, shape, nbytes, _ckpt.DEVICE_HOST, _host_buffer(t), key, gshape, offs,
                           exts, extra, owner=t)
    stage = torch.empty(shape, dtype=t.dtype, device=t.device)
    mem = stage.data_ptr() if cuda else _host_buffer(stage)
    return _state.Leaf("torch", dt, shape, nbytes, _ckpt.DEVICE_CUDA if cuda else _ckpt.DEVICE_HOST, mem,
                       ("torch-staged", id(stage), nbytes, dt, shape), gshape, offs, exts, extra,
                       sync_in=lambda: stage.copy_(t), sync_out=lambda: t.copy_(stage), owner=(t, stage),
                       cuda_index=index)


def _make(entry: dict) -> torch.Tensor:
    dt = getattr(torch, entry.get("torch_dtype", ""), None)
    if not isinstance(dt, torch.dtype):
        inv = {v: k for k, v in DTYPES.items()}
        dt = inv[entry["dtype"]]
    shape = tuple(entry["shape"])
    nbytes = math.prod(shape) * torch.empty((), dtype=dt).element_size()
    if nbytes < _state.ALIGN_MIN:
        return torch.empty(shape, dtype=dt)
    # Page-aligned, so that the library reads the chunks straight into the
    # tensor (O_DIRECT needs block-aligned memory; torch's allocator gives
    # 64 bytes) instead of through a buffer and a copy.
    raw = torch.empty(nbytes + _state.ALIGN, dtype=torch.uint8)
    off = -raw.data_ptr() % _state.ALIGN
    return raw[off:off + nbytes].view(dt).view(shape)


def _match(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


_state.register_adapter("torch", _match, _describe, _make)


def current_stream_handle(index: int):
    """Torch's current stream on CUDA device index, as the library takes it
    (a cudaStream_t)."""
    return torch.cuda.current_stream(index).cuda_stream


def device_scope(index: int):
    """Makes CUDA device index current (cudaSetDevice) for the calls in the
    block: the library uses the device current when its first CUDA region
    is added, and launches its checksum kernels on the trainer's stream,
    which must belong to the current device."""
    return torch.cuda.device(index)


def synchronize(index: int) -> None:
    """Waits for the work queued on torch's current stream of device index:
    a restore's copies (on the library's own stream) must not overtake
    work still reading or writing the tensors."""
    torch.cuda.current_stream(index).synchronize()


def __getattr__(name):
    # The DCP plugin imports torch.distributed.checkpoint: only when used.
    if name in ("StorageWriter", "StorageReader"):
        from . import dcp
        return getattr(dcp, name)
    raise AttributeError(name)
