"""ckpt.Error and its subclasses: one per error code of the library.

Every error carries ``code`` (the C library's negative code: ``-errno`` or
``-CKPT_E*``) and ``message``. Errors found by the Python layer itself (a
state that does not match the checkpoint, an object that cannot be pickled)
use the code the C library would give the same fault.
"""
from __future__ import annotations

import errno as _errno

from . import _ckpt


class Error(Exception):
    """Base of every error ckpt raises."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} [code {self.code}]"

    def __reduce__(self):
        # Exception pickles as cls(*self.args), and args holds the message
        # alone: DCP sends a rank's error to the others pickled, and every
        # rank would get a TypeError instead of it. Rebuilt from (code,
        # message), then the attributes set since (version, errno, ...).
        return (type(self), (self.code, self.message), dict(self.__dict__))


class CorruptError(Error):
    """A checksum or structure check failed (CKPT_ECORRUPT)."""


class FormatError(Error):
    """A format or schema version this build cannot read (CKPT_EFORMAT)."""


class NoVersionError(Error):
    """No such version, or none restorable (CKPT_ENOVERSION)."""


class SkippedError(Error):
    """The save was skipped: the staging pool is busy (CKPT_ESKIPPED)."""


class TooBigError(Error):
    """The save can never fit in the staging pool under pool_policy=skip (CKPT_ETOOBIG)."""


class MismatchError(Error):
    """The checkpoint does not match the state it is restored into (CKPT_EMISMATCH)."""


class ConfigError(Error, ValueError):
    """An invalid setting (CKPT_ECONFIG)."""


class IndexDBError(Error):
    """The LMDB index failed (CKPT_EINDEX)."""


class InvalidNameError(Error, ValueError):
    """An invalid job id or region name (CKPT_ENAME)."""


class StateError(Error):
    """A call not valid in the current state (CKPT_ESTATE)."""


class ClosedError(StateError):
    """The Checkpointer is closed."""


class FaultInjectedError(Error):
    """A fault point armed by a test fired (CKPT_EFAULT_INJECTED)."""


class DeviceError(Error):
    """A CUDA call failed (CKPT_EDEVICE)."""


class ContractError(Error):
    """A lazy save's state changed before fence() (CKPT_ECONTRACT)."""


class UnavailableError(Error):
    """The tier is not available to this context (CKPT_EUNAVAIL)."""


class UnreachableError(Error):
    """A committed version exists but no copy of it can be reached
    (CKPT_EUNREACHABLE): restore refuses to start the job afresh."""


class SystemCallError(Error, OSError):
    """A system error (a negative errno); ``errno`` holds it."""

    def __init__(self, code: int, message: str):
        Error.__init__(self, code, message)
        self.errno = -code


class WaitTimeoutError(SystemCallError, TimeoutError):
    """A wait ran out of time (-ETIMEDOUT)."""


class InvalidInputError(Error, ValueError):
    """Python input ckpt cannot take (-EINVAL)."""


class PickleError(InvalidInputError):
    """A leaf of the state could not be pickled or unpickled."""


class UnsupportedTypeError(InvalidInputError, TypeError):
    """A leaf of an unsupported type or dtype."""


_BY_CODE = {
    _ckpt.ECORRUPT: CorruptError,
    _ckpt.EFORMAT: FormatError,
    _ckpt.ENOVERSION: NoVersionError,
    _ckpt.ESKIPPED: SkippedError,
    _ckpt.ETOOBIG: TooBigError,
    _ckpt.EMISMATCH: MismatchError,
    _ckpt.ECONFIG: ConfigError,
    _ckpt.EINDEX: IndexDBError,
    _ckpt.ENAME: InvalidNameError,
    _ckpt.ESTATE: StateError,
    _ckpt.EFAULT_INJECTED: FaultInjectedError,
    _ckpt.EDEVICE: DeviceError,
    _ckpt.ECONTRACT: ContractError,
    _ckpt.EUNAVAIL: UnavailableError,
    _ckpt.EUNREACHABLE: UnreachableError,
}


def from_code(code: int, message: str) -> Error:
    """The exception for a C error code (negative), with message."""
    c = -code if code < 0 else code
    if c in _BY_CODE:
        return _BY_CODE[c](-c, message)
    if c == _errno.ETIMEDOUT:
        return WaitTimeoutError(-c, message)
    if c == _errno.EINVAL:
        return InvalidInputError(-c, message)
    return SystemCallError(-c, message)


_ckpt._set_error_factory(from_code)
