"""gobatch: zero-copy training batches from Go reader processes over a shared-memory ring.

    import gobatch
    with gobatch.Loader("nowcast.toml", framework="torch") as loader:
        for batch in loader:          # {tensor name: tensor}, views into shared memory
            train_step(batch["x"])    # its slot goes back to the producers when the batch is gone

:class:`Loader` starts a ``shmloader`` child on a private ring; :func:`attach` joins the named
ring of a standalone ``shmloader run --ring NAME``. The protocol is docs/PROTOCOL.md.
"""

from __future__ import annotations

from ._child import shmloader_path
from ._config import ORDER_EPOCHS, ORDER_STREAM
from ._cuda import cuda_batches
from ._lease import Batch, TensorSpec
from ._loader import Loader
from ._named import attach
from ._plan import plan
from ._ring import Ring
from ._validation import ValidationLoader, ValidationSet
from .errors import (
    ConfigError,
    GobatchError,
    GobatchWarning,
    LoaderError,
    RingError,
    RingFileError,
    RingPermissionError,
    RingTruncatedError,
    SlotsHeldError,
    StreamEndedError,
    UnsafeRingError,
)

__all__ = [
    "Loader",
    "ValidationSet",
    "ValidationLoader",
    "Ring",
    "Batch",
    "TensorSpec",
    "attach",
    "cuda_batches",
    "plan",
    "shmloader_path",
    "GobatchError",
    "LoaderError",
    "ConfigError",
    "RingError",
    "RingFileError",
    "RingPermissionError",
    "UnsafeRingError",
    "RingTruncatedError",
    "SlotsHeldError",
    "StreamEndedError",
    "GobatchWarning",
    "ORDER_STREAM",
    "ORDER_EPOCHS",
]
__version__ = "0.1.0"
