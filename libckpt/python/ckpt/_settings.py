"""Where a Checkpointer's settings come from, in order of precedence:

1. keyword arguments;
2. the CKPT_* environment variables (read by the C library);
3. the launcher: an initialised torch.distributed group, else torchrun's
   RANK / WORLD_SIZE (TORCHELASTIC_RESTART_COUNT, the launch's number,
   is read by the C library as the incarnation).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, Optional, Tuple

from .errors import ConfigError
from . import _ckpt


def _text(key: str, v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, str)):
        return str(v)
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, (list, tuple, set)) and all(isinstance(x, str) for x in v):
        return ",".join(v)
    raise ConfigError(-(_ckpt.ECONFIG), f"setting {key}: {type(v).__name__} {v!r} is not a str, int or bool")


def _dist() -> Tuple[Optional[int], Optional[int]]:
    """rank and world size of an initialised torch.distributed group."""
    torch = sys.modules.get("torch")  # never import torch for this
    if torch is None:
        return None, None
    try:
        d = torch.distributed
        if d.is_available() and d.is_initialized():
            return d.get_rank(), d.get_world_size()
    except Exception:
        pass
    return None, None


def _env_int(name: str) -> Optional[int]:
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ConfigError(-(_ckpt.ECONFIG), f"{name}={v!r} is not an integer") from None


def resolve(job: str, root: Optional[str], rank: Optional[int], world_size: Optional[int],
            settings: Dict[str, Any]) -> Dict[str, str]:
    """The settings to hand to the C library (ckpt_config_set), as text."""
    if not isinstance(job, str):
        raise ConfigError(-(_ckpt.ECONFIG), f"job must be a str, not {type(job).__name__}")
    out = {k: _text(k, v) for k, v in settings.items() if v is not None}
    for reserved in ("job_id", "rank", "world_size", "root"):
        if reserved in settings:
            raise ConfigError(-(_ckpt.ECONFIG), f"pass {reserved} as its own argument, not in **settings")
    out["job_id"] = job
    if root is not None:
        out["root"] = _text("root", root)
    drank, dworld = _dist()
    if rank is None and "CKPT_RANK" not in os.environ:
        rank = drank if drank is not None else _env_int("RANK")
    if world_size is None and "CKPT_WORLD_SIZE" not in os.environ:
        world_size = dworld if dworld is not None else _env_int("WORLD_SIZE")
    if rank is not None:
        out["rank"] = _text("rank", rank)
    if world_size is not None:
        out["world_size"] = _text("world_size", world_size)
    return out


def local_rank() -> Optional[int]:
    """torchrun's LOCAL_RANK: which GPU of the node this rank uses."""
    return _env_int("LOCAL_RANK")
