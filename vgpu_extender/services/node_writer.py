"""Writes newly seen nodes to the store in the background, in batches.

A scheduling request may carry thousands of Node objects the extender has not seen
(``nodeCacheCapable: false``, standalone); writing them inside the request took tens
of seconds at 5,000 nodes, past kube-scheduler's timeout. They go to the index at
once and here to the store: a thread writes what is pending in transactions of at
most ``batch_size`` nodes; a failed batch is logged and tried again after
``retry_s``. Nothing is lost by a crash before the write: the index is rebuilt from
the store on start, so the node is unknown again and the next request that carries
it registers it afresh.

``flush`` writes one node at once (a bind needs its node's row before it writes its
own); ``cancel`` drops pending nodes that a later, authoritative write supersedes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from vgpu_extender import store
from vgpu_extender.domain import NodeInventory
from vgpu_extender.store.errors import StoreUnavailable, classify, is_busy
from vgpu_extender.store.node_batch import insert_new_nodes

logger = logging.getLogger(__name__)

#: Inventory source recorded for nodes first seen in a scheduling request.
SOURCE = "annotation"


class NodeWriter:
    """Pending node inventories, written to the store by one background thread."""

    def __init__(
        self,
        *,
        sessions: store.Sessions,
        clock: Callable[[], datetime],
        on_refused: Callable[[NodeInventory, store.StoreError], None],
        batch_size: int = 250,
        retry_s: float = 1.0,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._on_refused = on_refused
        self._batch_size = batch_size
        self._retry_s = retry_s
        self._pending: dict[str, NodeInventory] = {}
        #: The names of the batch being written (pending again if it fails).
        self._in_flight: frozenset[str] = frozenset()
        #: Guards ``_pending``; the thread waits on it for work.
        self._changed = threading.Condition()
        #: Held by whoever writes, so a flush or a cancel waits for a batch under way.
        self._writing = threading.Lock()
        self._stopping = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ callers
    def submit(self, inventories: Iterable[NodeInventory]) -> None:
        with self._changed:
            for inventory in inventories:
                self._pending[inventory.name] = inventory
            self._changed.notify()
        self._start()

    def pending(self) -> int:
        with self._changed:
            return len(self._pending)

    def flush(self, name: str) -> None:
        """Write ``name`` now if it waits (raises ``StoreError`` if the store refuses)."""
        with self._changed:
            if name not in self._pending and name not in self._in_flight:
                return
        with self._writing:  # a batch under way with it is written (or back pending)
            with self._changed:
                inventory = self._pending.pop(name, None)
            if inventory is None:
                return
            try:
                self._write([inventory])
            except store.FAILURES as exc:
                with self._changed:
                    self._pending.setdefault(name, inventory)
                if isinstance(exc, store.StoreError):
                    raise
                raise classify(exc, "write node") from exc

    def cancel(self, names: Iterable[str]) -> None:
        """Forget pending writes of ``names`` (once any batch under way is written)."""
        wanted = list(names)
        with self._writing, self._changed:
            for name in wanted:
                self._pending.pop(name, None)

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until nothing is pending or being written; whether that happened."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._writing, self._changed:
                if not self._pending:
                    return True
            time.sleep(0.01)
        return False

    def stop(self, timeout_s: float = 10.0) -> None:
        """Write what is pending (one last try) and end the thread."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._write_pending(final=True)

    # ------------------------------------------------------------------ the thread
    def _start(self) -> None:
        with self._changed:
            if self._thread is not None or self._stopping:
                return
            self._thread = threading.Thread(target=self._run, name="vgpu-node-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._stopping:
                    self._changed.wait()
                if self._stopping:
                    return
            if not self._write_pending(final=False):
                with self._changed:
                    self._changed.wait(self._retry_s)  # the store failed: not in a spin

    def _write_pending(self, *, final: bool) -> bool:
        """Write every pending node, a batch at a time; False when a batch failed (it
        is pending again, unless newer inventories of its nodes came meanwhile)."""
        while True:
            with self._writing:
                with self._changed:
                    if not self._pending:
                        return True
                    names = list(self._pending)[: self._batch_size]
                    batch = [self._pending.pop(name) for name in names]
                    self._in_flight = frozenset(names)
                try:
                    again = self._write_batch(batch)
                except Exception as exc:  # the thread must outlive any failure
                    logger.warning(
                        "%d new nodes not written to the store yet (%s): %s",
                        len(batch),
                        "giving up at stop" if final else f"retrying in {self._retry_s:g} s",
                        exc,
                        exc_info=not isinstance(exc, store.StoreError),
                    )
                    if final:
                        return False
                    with self._changed:
                        for inventory in batch:
                            self._pending.setdefault(inventory.name, inventory)
                    return False
                else:
                    if again:
                        if final:
                            return False
                        with self._changed:
                            for inventory in again:
                                self._pending.setdefault(inventory.name, inventory)
                        return False
                finally:
                    with self._changed:
                        self._in_flight = frozenset()

    def _write_batch(self, batch: Sequence[NodeInventory]) -> list[NodeInventory]:
        """One transaction; when the store refuses it for any reason but being out of
        reach (bad input, a UUID another node holds, a value the database rejects), each
        node alone, so that one bad node holds up no other. A node refused for its input
        or a conflict is reported, not retried. Returns the nodes refused otherwise (to
        be tried again); a store out of reach or busy raises (the batch is tried again)."""
        try:
            self._write(batch)
            return []
        except StoreUnavailable:
            raise
        except (store.StoreInputError, store.StoreConflict) as exc:
            if len(batch) == 1:
                self._on_refused(batch[0], exc)
                return []
        except store.StoreError as exc:
            if len(batch) == 1 or is_busy(exc):  # busy: each alone would wait as long
                raise
            logger.info("a batch of %d new nodes refused, each alone now: %s", len(batch), exc)
        again: list[NodeInventory] = []
        failure: store.StoreError | None = None
        for inventory in batch:
            try:
                self._write([inventory])
            except (store.StoreInputError, store.StoreConflict) as exc:
                self._on_refused(inventory, exc)
            except StoreUnavailable:
                raise
            except store.StoreError as exc:
                if is_busy(exc):
                    raise
                failure = failure or exc
                again.append(inventory)
        if failure is not None and len(again) == len(batch):
            raise failure
        if failure is not None:
            logger.warning(
                "%d new nodes not written to the store yet (retrying in %g s): %s",
                len(again),
                self._retry_s,
                failure,
            )
        return again

    def _write(self, batch: Sequence[NodeInventory]) -> None:
        """New nodes in bulk; one the store holds already (written meanwhile by another
        path) goes through the ordinary upsert. Every failure, the commit's included,
        leaves as a ``StoreError``."""
        now = self._clock()
        try:
            with self._sessions.begin() as session:
                held = insert_new_nodes(session, inventories=batch, source=SOURCE, now=now)
                for inventory in held:
                    store.upsert_node(session, inventory=inventory, source=SOURCE, now=now)
        except store.DriverError as exc:
            raise classify(exc, "write nodes") from exc


class NodeRechecks:
    """Nodes to look at again at a set time: a vendor's handshake verdict may change
    with nothing on the node changing (a plugin that stops answering). One daemon
    thread calls ``look(name)`` when a node is due. The latest verdict on a node sets
    its time (a node agent that keeps answering keeps moving it on, so only silent
    nodes are read again), and a look sets the next one itself."""

    def __init__(self, *, look: Callable[[str], None], clock: Callable[[], datetime]) -> None:
        self._look = look
        self._clock = clock
        self._due: dict[str, datetime] = {}
        self._changed = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def set(self, name: str, when: datetime | None) -> None:
        """Look at ``name`` at ``when``; None: no look is due."""
        with self._changed:
            if self._stopping:
                return
            if when is None:
                self._due.pop(name, None)
                return
            self._due[name] = when
            self._changed.notify()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="vgpu-node-recheck", daemon=True
                )
                self._thread.start()

    def due(self) -> dict[str, datetime]:
        """The nodes waiting for a look, and when."""
        with self._changed:
            return dict(self._due)

    def stop(self, timeout_s: float = 1.0) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._changed:
                if self._stopping:
                    return
                now = self._clock()
                ready = [name for name, when in self._due.items() if when <= now]
                if not ready:
                    soonest = min(self._due.values(), default=None)
                    wait = 3600.0 if soonest is None else (soonest - now).total_seconds()
                    self._changed.wait(max(0.05, wait))
                    continue
                for name in ready:
                    del self._due[name]
            for name in ready:
                try:
                    self._look(name)
                except Exception:  # the thread must outlive any failure
                    logger.exception("node %s: the look at its handshake failed", name)
