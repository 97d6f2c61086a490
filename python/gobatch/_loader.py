"""gobatch.Loader: batches from a ``shmloader`` producer, iterated over its ring.

A Loader owns a :class:`gobatch.Ring` (the ring it reads now) and a producer strategy that makes
each ring it reads: its own ``shmloader run`` child (``_own.OwnChild``) or, in node mode, the
node loader's (``_node.NodeRings``). With ``order = "epochs"`` one ring carries many epochs
one after another (``ring_epochs`` of the strategy: its own child serves 65536 epochs with one
cache), so a new epoch goes on in the same ring; :meth:`Loader.set_epoch` and
:meth:`Loader.load_state_dict` to another place close the ring and ask the strategy for a new
one."""

from __future__ import annotations

import os
from typing import IO, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _caller, _ring
from ._batch_options import TimeLike, batch_flags
from ._child import Command, shmloader_path
from ._config import ORDER_EPOCHS, ORDER_STREAM, ConfigLike, config_argument, config_identity
from ._dataset import loader_class
from ._lease import Batch, TensorSpec
from ._node import NodeRings, node_spec, share_spec
from ._own import OwnChild, Restarts
from ._ranks import placement
from ._ring import STALL_WARNING_S, Ring, _check_framework, _stall_seconds
from ._stages import pass_figures
from ._supervise import RESTART_BACKOFF_S, RESTART_WINDOW_S, RESTARTS, Supervisor
from .errors import RingError, StreamEndedError

__all__ = ["Loader", "shmloader_path", "ORDER_STREAM", "ORDER_EPOCHS"]

_STATE_VERSION = 1


def _check_options(*, readers: Optional[int], start: Optional[int], restarts: int, restart_window_s: float,
                   restart_backoff_s: float) -> None:
    """Raises ValueError for a Loader argument out of its range, before any process starts."""
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        raise ValueError(f"restarts must be an int >= 0, not {restarts!r}")
    for arg, value in (("restart_window_s", restart_window_s), ("restart_backoff_s", restart_backoff_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise ValueError(f"{arg} must be a finite number of seconds >= 0, not {value!r}")
    if readers is not None and (not isinstance(readers, int) or readers < 1):
        raise ValueError(f"readers must be a positive int, not {readers!r}")
    if start is not None and (not isinstance(start, int) or start < 0):
        raise ValueError(f"start must be an int >= 0, not {start!r}")


def _first_epoch(epoch: Optional[int], order: str) -> int:
    """The epoch= argument, checked against the configuration's order."""
    if epoch is None:
        return 0
    if order != ORDER_EPOCHS:
        raise ValueError(f"epoch={epoch!r} needs [batch] order = {ORDER_EPOCHS!r}; this "
                         f"configuration's order is {order!r}")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch must be an int >= 0, not {epoch!r}")
    return epoch


class Loader:
    """Batches from a ``shmloader`` child process, over a private shared-memory ring.

    ``config`` is a TOML file (docs/ARCHITECTURE.md) or a dict of the same shape. A dict is
    checked here (NaN, infinities, keys that are not strings and other values JSON cannot carry
    are refused with :class:`ConfigError` naming the key path, before any process starts) and
    written as JSON to the child's stdin (``--config -``): no file is written, so nothing is
    left behind whenever either process dies, and the child's errors name the dict's line and
    key path (``<config dict>:7: source[0].dtype: ...``). The loader creates an anonymous
    memfd, starts ``shmloader run --config FILE --memfd FD`` with it, waits (at most
    ``start_timeout`` seconds) for the ring to be ready, and attaches as its consumer. Iterate it
    for batches (see :class:`gobatch.Ring`); use it as a context manager or call :meth:`close`.

    The lifetimes are tied both ways: the child exits when this process dies or closes the
    loader, and a child that fails makes the next batch request raise :class:`LoaderError` with
    the child's message and stderr tail; that error is sticky (every later request raises it
    too). A child killed by a signal (kill -9, the OOM killer, a crash) is restarted instead, at
    most ``restarts`` times within ``restart_window_s`` seconds, the first of a window at once
    and each further one after ``restart_backoff_s``, doubled for each: the new child joins the
    same ring (``shmloader run --join --memfd FD``), takes over the batches the dead one held and carries on at the ring's
    position, so iteration sees every batch once, in order, unchanged (each batch is a pure
    function of its index; docs/PROTOCOL.md 3.7). Each restart is reported as a
    :class:`GobatchWarning` and a ``gobatch`` log record naming the cause and the batches the dead
    child held. A child that dies again holding a batch its predecessor died holding is a
    deterministic failure: the stream ends with a :class:`LoaderError` naming that batch, as it
    does once the restarts are spent. A configuration the child refuses raises :class:`ConfigError`
    naming the field. A request that waits ``stall_warning_s`` seconds warns
    (:class:`GobatchWarning`, and the ``gobatch`` logger) with the child's state: running,
    stopped, a zombie, or its exit status once it has exited.

    PyTorch: when torch is imported by the time the Loader is made (or ``framework="torch"``),
    the Loader is also a ``torch.utils.data.IterableDataset``, so
    ``torch.utils.data.DataLoader(loader, batch_size=None)`` yields its batches in order (with
    ``num_workers=0``; ``pin_memory=True`` copies each into pinned memory), and ``len()`` of the
    DataLoader is the Loader's. :mod:`gobatch.lightning` has a LightningDataModule.

    Inside a torch ``DataLoader`` worker process the loader takes that worker's disjoint share
    of the stream, as a rank does: worker ``w`` of ``W`` on rank ``r`` of ``n`` is rank
    ``r * W + w`` of ``n * W`` (:attr:`rank` and :attr:`world_size` report those), so the
    workers' batches, taken in turn as the DataLoader does, are the stream without duplicates.

    Args:
        config: TOML path, an ocf-data-sampler YAML path (docs/OCF.md), or a dict with
            ``batch``, ``ring`` and ``source`` entries.
        batch_size, order, seed, t0_start, t0_end, cache_mb: replace the file's ``[batch]``
            values and the cache budget (``--batch-size`` ...); a YAML file needs batch_size.
        slots: batches the ring holds at once, replacing the file's ``[ring] slots``
            (``--slots``; default 4, at least 2): raise it to keep more batches lent at once.
        segment_steps: anchor time steps per segment of locality sampling and of the epochs'
            block shuffle, replacing the anchor source's ``segment_steps`` (``--segment-steps``;
            fewer steps fit a smaller cache, more mix less; docs/DATA.md).
        resident_segments: segments locality sampling keeps and the epochs' block shuffle mixes
            at once, replacing the anchor source's ``resident_segments``
            (``--resident-segments``; default: as many as two groups of the cache hold). More
            mixes more t0s into each batch at the cost of decoding chunks again (the plan's
            ``sampling_why`` says the trade).
        time_periods: ranges of t0, ``[(start, end), ...]`` (ISO 8601 strings or datetimes, both
            ends included, None for an open end), as ocf-data-sampler's and PVNet's
            ``time_periods``: a t0 in any; replaces the file's ``time_periods`` and ``t0_start``
            .. ``t0_end`` (``--time-period START/END``).
        drop_last: with epochs, False keeps every sample in every epoch (``[batch] drop_last``,
            ``--drop-last``): one rank's last batch of an epoch is then smaller, as a DataLoader's
            is with ``drop_last=False``; with several ranks it is completed by the epoch's first
            samples again, as ``DistributedSampler`` pads (default True: the incomplete batch is
            dropped).
        concurrent: every batch is one t0 with every location, row k the k-th location (as
            ocf-data-sampler's ``PVNetConcurrentDataset`` stacks a sample; ``--concurrent``,
            ``[batch] concurrent``); the batch size is then the number of locations, and
            ``order`` draws t0s (with epochs, each once per epoch). ``batch_size`` may be left
            out, also for a YAML file.
        framework: ``"numpy"`` (arrays) or ``"torch"`` (tensors), writable views of the slot.
        data_root: directory relative store paths of the config are resolved against
            (``--data-root``).
        readers: reader goroutines of the child (``--readers``).
        start: stream index of the first batch (``--start``, to resume a stream). With
            ``order = "epochs"`` it must lie in ``epoch``.
        epoch: ``[batch] order = "epochs"`` only: the epoch the first ``for`` runs (default 0).
        shmloader: the binary to run (default: see :func:`shmloader_path`).
        start_timeout: seconds to wait for the ring to become ready.
        close_timeout: seconds :meth:`close` waits for the child to exit before it signals it.
        rank: data-parallel rank (default: torchrun's ``RANK``, else 0). Rank ``r`` of
            ``world_size`` receives global batches ``k * world_size + r``: disjoint shares of one
            deterministic stream.
        world_size: number of data-parallel ranks (default: torchrun's ``WORLD_SIZE``, else 1).
        stall_warning_s: seconds a batch request may wait before it warns (and again each
            such period while it waits); the wait goes on.
        node: the node loader (one ``shmloader serve`` feeding every local rank from one
            cache): None uses it when torchrun's ``LOCAL_WORLD_SIZE`` is above 1 (or
            ``GOBATCH_NODE`` names one), True always, False never; a string is the socket name
            of a node loader started by hand (``shmloader serve --socket NAME``). A node
            loader killed by a signal is restarted under ``restarts`` as a child is (one rank
            starts it, and each rank's ring is joined by it); one started by hand is not, and
            its death ends every local rank's stream with a :class:`LoaderError` that says so.
        share: several jobs on one node, one decode: True (or a name, for several such
            loaders) gets this Loader's ring from the node's sharing node loader (``shmloader
            serve --share``, started by the first Loader that asks and kept for a minute after
            the last leaves), which serves every job of this user from its own configuration
            file and options over one decoded-chunk cache: a chunk that two jobs read alike is
            decoded once for both. Each job's stream is exactly the one it gets alone; a job's
            death does not touch the others. The cache's budget is the first job's
            ``cache_mb`` (or the default). The configuration must be a file. Not restarted when
            killed: every job's stream then ends with a :class:`LoaderError`.
        local_world_size: ranks on this node, for the node loader (default: torchrun's
            ``LOCAL_WORLD_SIZE``).
        node_rank: this node's rank (default: torchrun's ``GROUP_RANK``, else rank //
            local_world_size).
        restarts: restarts of a child killed by a signal allowed within ``restart_window_s``
            (default 2; 0 turns supervision off: the death ends the stream).
        restart_window_s: the window, in seconds, that ``restarts`` counts in (default 600).
        restart_backoff_s: seconds before the second restart of a window, doubled for each
            further one; the first is immediate (default 0.05).
        pin_memory: register the ring's memory with CUDA as page-locked (``cudaHostRegister``
            through torch), so that ``.to(device, non_blocking=True)`` of a batch is an
            asynchronous DMA from its slot; hold the batch until the copy is done
            (:func:`gobatch.cuda_batches` does). Without CUDA: a :class:`GobatchWarning`, and
            nothing else changes.
        extra_args: further ``shmloader run`` arguments, passed through.
        env: environment of the child (default: this process's).

    :meth:`state_dict` and :meth:`load_state_dict` save and restore the stream position (the
    stream is a pure function of the configuration and its seed), so a resumed loader continues
    at exactly the next batch.

    Epochs (``[batch] order = "epochs"``): an epoch is a seeded permutation of the whole sample
    space (every sample once, the last incomplete batch per rank dropped), and ``len(loader)``
    is this rank's batches per epoch. ``iter(loader)`` is an iterator of the current epoch that
    goes on where the last one stopped, as Python's iterators do: ``next(iter(loader))`` and
    then ``for batch in loader`` yields the rest of that epoch, and so does a ``for`` after one
    left early (``break``) or after a warm-up ``islice``. A new epoch begins only when the
    current one is exhausted (the next ``iter`` then runs the next epoch) or :meth:`set_epoch`
    says so (the ``DistributedSampler`` rule); :meth:`load_state_dict` places the loader in the
    saved epoch at its saved batch. The first epoch is ``epoch`` (0). Ranks see disjoint samples
    of every epoch, the same number of batches each, as with
    ``DistributedSampler(drop_last=True)``. One ``shmloader`` child serves epoch after epoch in
    one ring, its decoded-chunk cache kept; only a :meth:`set_epoch` or
    :meth:`load_state_dict` to a place other than the next batch starts a new one.

    A bounded stream (``[batch] batches = N``) is read once: iterating it again after its end
    raises :class:`StreamEndedError` (never an empty loop).

    Node loader (``node``): the first Loader of a node starts ``shmloader serve`` and every
    local rank, that one included, gets its own ring from it (its stream exactly as above, from
    one shared cache); see ``gobatch._node``. A rank that dies is handled as the
    configuration's ``[node] on_rank_death`` says: ``"stop"`` (default) makes every other
    rank's next batch raise :class:`LoaderError` naming it, ``"continue"`` serves the others on.
    Epochs, :meth:`state_dict` and :meth:`load_state_dict` work per rank as above.
    """


    _foreign = False

    def __new__(cls, *args: Any, **kwargs: Any) -> "Loader":
        # A torch IterableDataset too when torch is in use (see _dataset).
        return super().__new__(loader_class(cls, kwargs.get("framework")) if cls is Loader else cls)

    def __init__(
        self,
        config: ConfigLike,
        *,
        framework: str = "numpy",
        data_root: Optional[Union[str, "os.PathLike[str]"]] = None,
        readers: Optional[int] = None,
        start: Optional[int] = None,
        epoch: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        shmloader: Optional[str] = None,
        start_timeout: float = 60.0,
        close_timeout: float = 5.0,
        stall_warning_s: float = STALL_WARNING_S,
        restarts: int = RESTARTS,
        restart_window_s: float = RESTART_WINDOW_S,
        restart_backoff_s: float = RESTART_BACKOFF_S,
        extra_args: Sequence[str] = (),
        env: Optional[Mapping[str, str]] = None,
        node: Union[None, bool, str] = None,
        share: Union[None, bool, str] = None,
        local_world_size: Optional[int] = None,
        node_rank: Optional[int] = None,
        batch_size: Optional[int] = None, order: Optional[str] = None, seed: Optional[int] = None,
        t0_start: Optional[TimeLike] = None, t0_end: Optional[TimeLike] = None, cache_mb: Optional[int] = None,
        slots: Optional[int] = None, segment_steps: Optional[int] = None,
        time_periods: Optional[Sequence[Tuple[Optional[TimeLike], Optional[TimeLike]]]] = None, pin_memory: bool = False,
        drop_last: Optional[bool] = None, concurrent: bool = False, resident_segments: Optional[int] = None,
    ) -> None:
        _check_framework(framework)
        _check_options(readers=readers, start=start, restarts=restarts, restart_window_s=restart_window_s,
                       restart_backoff_s=restart_backoff_s)
        self._stall_warning_s = _stall_seconds(stall_warning_s)
        config_path, config_json = config_argument(config)
        where = placement(rank, world_size)
        self._rank, self._world_size = where.rank, where.world_size
        self._framework = framework
        overrides = {k: v for k, v in (("seed", seed), ("order", order)) if v is not None}
        self._identity = config_identity(config)._replace(**overrides)
        self._order = self._identity.order
        self._epoch = _first_epoch(epoch, self._order)
        self._epoch_batches = 0  # this rank's batches per epoch, known once the ring is attached
        self._last_rows = 0  # epochs without drop_last, one rank: the rows of an epoch's last batch (0: all)
        self._epoch_start: Optional[Tuple[Ring, Dict[str, Any]]] = None  # stats() as the epoch's first batch was asked for
        self._last_epoch: Optional[Dict[str, Any]] = None  # the figures of the last epoch read to its end
        self._ring_end = 0  # epochs: the stream index where the ring ends (an epoch boundary)
        self._positioned_at = 0  # epochs: the stream batch the loader was last placed at
        self._placement = 0  # epochs: counts placements; an iterator of an earlier one has ended
        command = Command(shmloader_path(shmloader), config_path, config_json, readers,
                          os.fspath(data_root) if data_root is not None else None, tuple(extra_args),
                          dict(env) if env is not None else None,
                          tuple(batch_flags(batch_size, order, seed, t0_start, t0_end, cache_mb, slots, segment_steps,
                                            time_periods, drop_last, concurrent, resident_segments)))
        if share not in (None, False) and node not in (None, False):
            raise ValueError("give at most one of node and share: a sharing node loader serves every job's ranks")
        if where.in_worker:
            spec = None
        elif share not in (None, False):
            spec = share_spec(share, rank=where.rank, world_size=where.world_size)
        else:
            spec = node_spec(node, rank=where.rank, world_size=where.world_size, local_world_size=local_world_size,
                             node_rank=node_rank)
        self._producer: Union[OwnChild, NodeRings]
        supervision = Restarts(restarts, float(restart_window_s), float(restart_backoff_s))
        if spec is not None:
            self._producer = NodeRings(spec, command, start_timeout=start_timeout, restarts=supervision)
        else:
            self._producer = OwnChild(command, rank=where.rank, world_size=where.world_size,
                                      start_timeout=start_timeout, close_timeout=close_timeout, restarts=supervision)
        self._pin = bool(pin_memory)
        self._ring: Ring = self._open(start)
        for message in self._ring.description.warnings:  # once per Loader, at the user's line
            _caller.warn(message)
        _ring.track(self)

    def _open(self, start: Optional[int]) -> Ring:
        """A new ring from the producer strategy, from stream batch ``start`` (with epochs: of
        the loader's epoch, and the strategy's ``ring_epochs`` epochs from it, whose length is
        read off the ring)."""
        epochs = self._order == ORDER_EPOCHS
        ring = self._producer.open(start=start, epoch=self._epoch if epochs else None, framework=self._framework,
                                   stall_warning_s=self._stall_warning_s, check=self._learn_epoch if epochs else None)
        if self._pin and not ring.pin_memory():
            self._pin = False  # no CUDA: said once (Ring.pin_memory warns), not at every new ring
        return ring

    def _restart(self, *, start: Optional[int], epoch: Optional[int]) -> None:
        """Closes the ring, stops its producer and opens a new ring at stream batch ``start``
        (of ``epoch``); in node mode the session to the node loader stays."""
        ring, producer = self._ring, self._producer
        try:
            ring.close()
        finally:
            producer.stop()
        self._epoch = epoch or 0
        self._ring = self._open(start)

    # ---- the ring ----

    @property
    def framework(self) -> str:
        """``"numpy"`` or ``"torch"``."""
        return self._framework

    @property
    def pinned(self) -> bool:
        """Whether the ring's memory is registered with CUDA as page-locked (``pin_memory``)."""
        return self._ring._pinned is not None

    @property
    def specs(self) -> Dict[str, TensorSpec]:
        """The tensors of every batch, in table order."""
        return self._ring.specs

    @property
    def slots(self) -> int:
        """Batches in flight (the ring's slot count)."""
        return self._ring.slots

    @property
    def batch_size(self) -> int:
        """Examples per batch, as the producer declared it."""
        return self._ring.batch_size

    @property
    def start_batch(self) -> int:
        """Stream index of the ring's first batch."""
        return self._ring.start_batch

    @property
    def next_batch(self) -> int:
        """Stream index of the batch the next request returns."""
        return self._ring.next_batch

    @property
    def total_batches(self) -> Optional[int]:
        """Batches in the ring's stream, ``None`` when unbounded."""
        return self._ring.total_batches

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._ring.closed

    def stats(self) -> Dict[str, Any]:
        """The ring's counters (see :meth:`gobatch.Ring.stats`) and ``restarts``: the children (in
        node mode, the node loaders this rank restarted) restarted after a kill over the loader's
        life. With epochs, ``last_epoch`` (None until one has been read to its end in one ring):
        that epoch's ``batches``, ``seconds``, ``batches_per_s``, each stage's ``stage_load``,
        the ``limiting_stage`` and per source ``decode_amplification`` (gobatch._stages)."""
        stats = self._ring.stats()
        stats["restarts"] = self._producer.restart_count
        stats["last_epoch"] = self._last_epoch
        return stats

    def release(self) -> None:
        """Hand the slot of the batch handed out last back to the producers now: see
        :meth:`gobatch.Ring.release`."""
        self._ring.release()

    # ---- the producer ----

    @property
    def pid(self) -> Optional[int]:
        """The shmloader child's pid (None after a failed start); in node mode the node
        loader's."""
        return self._producer.pid

    @property
    def exit_code(self) -> Optional[int]:
        """The child's exit status once it has exited, else None."""
        return self._producer.exit_code

    # ---- position ----

    @property
    def rank(self) -> int:
        """This loader's data-parallel rank."""
        return self._rank

    @property
    def world_size(self) -> int:
        """The number of data-parallel ranks."""
        return self._world_size

    def state_dict(self) -> Dict[str, Any]:
        """The stream position, to resume at exactly the next batch: a small dict of
        ``next_batch`` (this rank's stream index of the batch the next request would return),
        ``seed``, ``rank``, ``world_size`` and a digest of the configuration; with epochs also
        ``order``, ``epoch`` (the epoch ``next_batch`` lies in: the next one once an epoch is
        complete) and ``epoch_batches``."""
        state: Dict[str, Any] = {
            "version": _STATE_VERSION,
            "next_batch": self.next_batch,
            "seed": self._identity.seed,
            "config_sha256": self._identity.digest,
            "rank": self._rank,
            "world_size": self._world_size,
        }
        if self._order == ORDER_EPOCHS:
            state.update(order=ORDER_EPOCHS, epoch=self.next_batch // self._epoch_batches,
                         epoch_batches=self._epoch_batches)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue the stream at ``state["next_batch"]`` (from :meth:`state_dict` of a loader
        with the same configuration, rank and world size): the child is restarted there, and
        the next batch requested is exactly that batch. With epochs, the next ``for`` runs the
        rest of the saved epoch, from that batch."""
        try:
            version, nxt = state["version"], state["next_batch"]
            seed, digest = state["seed"], state["config_sha256"]
            rank, world = state["rank"], state["world_size"]
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a gobatch.Loader state_dict: missing {e}") from None
        if version != _STATE_VERSION:
            raise ValueError(f"state_dict version {version!r}, this gobatch reads {_STATE_VERSION}")
        if not isinstance(nxt, int) or nxt < 0:
            raise ValueError(f"state_dict next_batch must be an int >= 0, not {nxt!r}")
        order = state.get("order", ORDER_STREAM)
        mismatches = [f"{k} {a!r} != {b!r}" for k, a, b in (
            ("seed", seed, self._identity.seed), ("config_sha256", digest, self._identity.digest),
            ("rank", rank, self._rank), ("world_size", world, self._world_size),
            ("order", order, self._order)) if a != b]
        if self._order == ORDER_EPOCHS and not mismatches and state.get("epoch_batches") != self._epoch_batches:
            mismatches.append(f"epoch_batches {state.get('epoch_batches')!r} != {self._epoch_batches!r} "
                              "(the same configuration over other data)")
        if mismatches:
            raise ValueError("state_dict is from another stream: " + ", ".join(mismatches))
        if self._order != ORDER_EPOCHS:
            self._restart(start=nxt, epoch=None)
        elif not self._place(nxt // self._epoch_batches, nxt):
            self._restart(start=nxt, epoch=nxt // self._epoch_batches)

    # ---- epochs ----

    def _learn_epoch(self, ring: Ring) -> None:
        """Reads this rank's batches per epoch off a new ring's description (PROTOCOL.md 2.9)
        and checks the ring against it: ``shmloader run --epoch E --epochs K`` ends the ring's
        stream at the end of epoch E + K - 1, stream index (E + K) * batches per epoch, and
        starts it inside epoch E."""
        epochs = self._producer.ring_epochs
        end = ring.start_batch + (ring.total_batches or 0)
        n = ring.description.epoch_batches or 0
        if ring.description.order != ORDER_EPOCHS or n == 0:
            raise RingError(f"{ring._label}: asked for epochs, but the ring's batch description says order "
                            f"{ring.description.order!r} with {n} batches per epoch (is the shmloader binary "
                            "older than this gobatch?)")
        if end != (self._epoch + epochs) * n or not self._epoch * n <= ring.start_batch < (self._epoch + 1) * n:
            raise RingError(f"{ring._label}: asked for epochs {self._epoch} .. {self._epoch + epochs - 1}, got "
                            f"stream batches {ring.start_batch} .. {end - 1}, which are not those epochs (is the "
                            "shmloader binary older than this gobatch?)")
        self._epoch_batches = n
        # drop_last = false pads an epoch's last batch with its first samples; with one rank
        # the padding is cut off, as DataLoader's last batch is smaller (several ranks keep it,
        # as DistributedSampler's padded samples are kept).
        samples, size = ring.description.samples or 0, ring.batch_size
        self._last_rows = samples - (n - 1) * size if self._world_size == 1 and n * size > samples > 0 else 0
        self._ring_end = end
        self._positioned_at = ring.start_batch  # a new ring: the next iterator runs from here
        self._placement += 1

    @property
    def order(self) -> str:
        """The configuration's ``[batch] order``: ``"stream"`` (independent draws) or
        ``"epochs"``."""
        return self._order

    @property
    def epoch(self) -> int:
        """The epoch of the current iterator (``order = "epochs"``; 0 otherwise): the one a
        ``for`` runs or would go on with. Once it is exhausted the next ``iter(loader)`` makes
        it the next epoch."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``for`` run epoch ``epoch`` from its first batch, as
        ``DistributedSampler.set_epoch`` does (call it before each epoch, or let each exhausted
        epoch lead to the next). Setting the epoch the loader is already placed at and has not
        begun (a fresh loader, or one :meth:`load_state_dict` resumed inside that epoch) keeps
        that place. The epoch right after an exhausted one goes on in the same ring (the child
        and its cache stay); any other epoch starts a new ring there. Iterators made before the
        call are ended. Raises ``ValueError`` unless ``[batch] order = "epochs"``."""
        if self._order != ORDER_EPOCHS:
            raise ValueError(f"set_epoch({epoch!r}): {self._ring._label} streams without epochs ([batch] order = "
                             f"{self._order!r}); set [batch] order = {ORDER_EPOCHS!r} to iterate epochs")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be an int >= 0, not {epoch!r}")
        self._check_open()
        if epoch == self._epoch and self._unbegun():
            return
        if not self._place(epoch, epoch * self._epoch_batches):
            self._restart(start=None, epoch=epoch)

    def _place(self, epoch: int, batch: int) -> bool:
        """Places the loader at stream batch ``batch`` of ``epoch`` without a new ring when that
        is the running ring's next batch (an epoch that follows the one read to its end, or a
        state saved here, and the ring has not failed); False when it is not."""
        if self._ring.next_batch != batch or batch >= self._ring_end or self._ring._failure is not None:
            return False
        self._epoch, self._positioned_at = epoch, batch
        self._placement += 1
        return True

    def _exhausted(self) -> bool:
        """The current epoch has been read to its end."""
        return self._ring.next_batch >= (self._epoch + 1) * self._epoch_batches

    def _check_open(self) -> None:
        """A closed (or foreign) loader is not restarted for another epoch."""
        if self._foreign:
            raise self._ring._foreign_error()
        if self._ring.closed:
            raise self._ring._closed_error()

    def _unbegun(self) -> bool:
        """No batch has been taken since the loader was placed."""
        return self.next_batch == self._positioned_at

    # ---- iteration ----

    def __len__(self) -> int:
        """With epochs: this rank's batches per epoch. Otherwise the ring's (bounded) stream
        length; ``TypeError`` for an unbounded stream."""
        if self._order == ORDER_EPOCHS:
            return self._epoch_batches
        return len(self._ring)

    def __iter__(self) -> Iterator[Batch]:
        """With epochs: an iterator of the current epoch, from where the last one stopped; of
        the next epoch once the current one is exhausted (see the class doc). Otherwise the
        loader itself, as :class:`gobatch.Ring`: raises :class:`StreamEndedError` on a bounded
        stream read to its end."""
        if self._order != ORDER_EPOCHS:
            if self._ring._read_to_end():
                raise StreamEndedError(self._ended_message())
            return self
        self._check_open()
        if self._exhausted():
            nxt = self._epoch + 1
            if not self._place(nxt, nxt * self._epoch_batches):
                self._restart(start=None, epoch=nxt)  # the ring ended with the epoch
        return _EpochIterator(self, self._placement)

    def __next__(self) -> Batch:
        """The next batch; with epochs, of the current epoch (``StopIteration`` at its end)."""
        if self._order != ORDER_EPOCHS:
            return self._ring.__next__()
        if self._exhausted():
            raise StopIteration
        ring = self._ring
        if ring.next_batch == self._epoch * self._epoch_batches:  # the epoch's first batch
            self._epoch_start = (ring, ring.stats())
        batch = ring.__next__()
        if self._exhausted():
            if self._last_rows:  # the epoch's last batch, padded: cut to its samples
                _cut_rows(batch, self._last_rows, ring.description.view.constants)
            start, self._epoch_start = self._epoch_start, None
            if start is not None and start[0] is ring:  # the whole epoch in this ring: its figures
                self._last_epoch = pass_figures(start[1], ring.stats())
        return batch

    def _ended_message(self) -> str:
        total = self.start_batch + int(self._ring._geom.total_batches)
        return (f"{self._ring._label}: its stream of {total} batches ([batch] batches = {total}) has been read "
                "to the end, so iterating it again would yield nothing; create a new Loader (or call "
                "load_state_dict() with an earlier state) to read it again, or set [batch] order = "
                f"{ORDER_EPOCHS!r} (leaving batches unset) to iterate epochs")

    # ---- closing ----

    def close(self) -> None:
        """Detach from the ring, stop the child (it exits on its own on seeing the consumer
        close; it is signalled after ``close_timeout`` seconds) and reap it. Idempotent."""
        if self._foreign:
            raise self._ring._foreign_error()
        try:
            self._ring.close()
        finally:
            self._producer.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if self._foreign or "_ring" not in self.__dict__:
            return  # a fork child never touches the parent's child; a failed start cleaned up
        try:
            self._ring._close_ring()
            self._producer.close()
        except Exception:
            pass

    def __reduce__(self) -> Any:
        return self._ring.__reduce__()

    def __repr__(self) -> str:
        return repr(self._ring)

    # ---- for tests and tools: the ring's and the child's internals ----

    @property
    def _label(self) -> str:
        return self._ring._label

    @property
    def _geom(self) -> Any:
        return self._ring._geom

    @property
    def _mm(self) -> Any:
        return self._ring._mm

    def _producer_states(self) -> List[str]:
        return self._ring._producer_states()

    @property
    def _proc(self) -> Any:
        child = getattr(self._producer, "child", None)
        return child.proc if child is not None else None

    @property
    def _stderr(self) -> Optional[IO[bytes]]:
        return getattr(self._producer, "stderr", None)

    @property
    def _supervisor(self) -> Optional[Supervisor]:
        return getattr(self._producer, "supervisor", None)


def _cut_rows(batch: Batch, rows: int, constants: Sequence[Tuple[Tuple[str, ...], Any]]) -> None:
    """Replaces every tensor of ``batch`` (nested or not) by its first ``rows`` rows, views of
    the same slot (the batch keeps its lease through them); the description's constants are
    not rows and stay."""
    skip = {key for key, _ in constants}

    def cut(node: Dict[str, Any], path: Tuple[str, ...]) -> None:
        for key, value in node.items():
            at = path + (key,)
            if isinstance(value, dict):
                cut(value, at)
            elif at not in skip:
                node[key] = value[:rows]

    cut(batch, ())


class _EpochIterator:
    """``iter(loader)`` with epochs: the loader's batches up to the end of the epoch it was made
    in. It shares the loader's position with every other iterator of that epoch, and ends once
    the loader is placed elsewhere (:meth:`Loader.set_epoch`, :meth:`Loader.load_state_dict`,
    the next epoch)."""

    __slots__ = ("_loader", "_placement")

    def __init__(self, loader: Loader, placement: int) -> None:
        self._loader, self._placement = loader, placement

    def __iter__(self) -> "_EpochIterator":
        return self

    def __next__(self) -> Batch:
        loader = self._loader
        if loader._placement != self._placement:
            raise StopIteration
        return loader.__next__()
