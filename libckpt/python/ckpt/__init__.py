"""ckpt: checkpoints for distributed training, from Python.

``import ckpt`` needs no torch: states of numpy arrays, bytes and picklable
objects save and restore through ``ckpt.Checkpointer``. ``ckpt.torch`` adds
tensors (CPU and CUDA, read where they live) and the
torch.distributed.checkpoint StorageWriter / StorageReader. docs/python.md.
"""
from . import _ckpt
from .errors import (Error, CorruptError, FormatError, NoVersionError, SkippedError, TooBigError,
                     MismatchError, ConfigError, IndexDBError, InvalidNameError, StateError, ClosedError,
                     FaultInjectedError, DeviceError, ContractError, UnavailableError, UnreachableError,
                     SystemCallError,
                     WaitTimeoutError, InvalidInputError, PickleError, UnsupportedTypeError)
from .checkpointer import Checkpointer, SaveHandle, SaveStatus, VersionInfo, TIERS

__version__ = "0.1.0"
LATEST = "latest"
library_version = _ckpt.LIB_VERSION


def config_help() -> str:
    """Every library setting with its CKPT_* variable and default."""
    return _ckpt.config_help()


def strerror(code: int) -> str:
    """The library's text for an error code."""
    return _ckpt.strerror(code)


def cuda_available() -> bool:
    """True when the library was built with CUDA and a device is usable."""
    return _ckpt.cuda_available()


__all__ = [
    "Checkpointer", "SaveHandle", "SaveStatus", "VersionInfo", "TIERS", "LATEST", "config_help", "strerror",
    "cuda_available", "library_version", "Error", "CorruptError", "FormatError", "NoVersionError",
    "SkippedError", "TooBigError", "MismatchError", "ConfigError", "IndexDBError", "InvalidNameError",
    "StateError", "ClosedError", "FaultInjectedError", "DeviceError", "ContractError", "UnavailableError",
    "UnreachableError",
    "SystemCallError", "WaitTimeoutError", "InvalidInputError", "PickleError", "UnsupportedTypeError",
]
