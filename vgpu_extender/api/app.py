"""The FastAPI application, built per call: settings in, app out, nothing at import.

The lifespan builds the runtime (store, index, services, watches) and tears it down;
a test passes its own ``Settings`` and, when it wants one, its own ``KubeClient``.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from vgpu_extender.api.listeners import PortRouter, not_found
from vgpu_extender.api.operations import install as install_operations
from vgpu_extender.api.routes import admin_v1, extender, gpushare, health, metrics, ui, webhook
from vgpu_extender.api.store_errors import STORE_FAILURES, store_error_handler
from vgpu_extender.api.verbs import exception_handler
from vgpu_extender.kube import KubeClient
from vgpu_extender.services.runtime import Runtime, connect_kube
from vgpu_extender.settings import Settings
from vgpu_extender.vendors import Vendor, VendorSet


class ExtenderApp(FastAPI):
    """FastAPI, except that kube-scheduler's verbs are answered before any of its
    machinery runs: they come once per pod per verb, and the middleware stack and
    routing would cost a good share of a filter."""

    #: Which endpoints each port serves, when a second port is set (``listeners``).
    ports: PortRouter | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.ports is not None and scope["type"] == "http" and not self.ports.allows(scope):
            await not_found(send)
            return
        verb = extender.verb_of(scope)
        if verb is None:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        await extender.answer(verb, self, scope, receive, send)


def freeze_startup_objects() -> None:
    """Take every object alive once the runtime has started out of the cycle
    collector's full passes.

    A full collection walks every object the process holds, with every thread stopped
    (the GIL): with 5,000 nodes and 50,000 allocations loaded that is about 590,000
    objects (the libraries' modules and classes, the index) and 0.2 s without an
    answer to kube-scheduler (``benchmarks/memory.py``). Almost all of them live as
    long as the process, so the collector need not look at them again; it goes on
    collecting everything made afterwards.
    The garbage of start-up is collected first, so none of it is kept.
    """
    gc.collect()
    gc.freeze()


class StartupFreezer:
    """Freezes the start-up objects (:func:`freeze_startup_objects`) when asked, until
    ``thaw``: what the first sync with the API server adds is frozen once it is done,
    on its own thread, and must not be frozen after the app has stopped."""

    def __init__(self, counted: Callable[[int], None]) -> None:
        self._lock = threading.Lock()
        self._thawed = False
        self._counted = counted

    def freeze(self) -> None:
        with self._lock:
            if not self._thawed:
                freeze_startup_objects()
                # Counted once here: the count walks every frozen object.
                self._counted(gc.get_freeze_count())

    def thaw(self) -> None:
        with self._lock:
            self._thawed = True
            gc.unfreeze()
            self._counted(0)


def create_app(
    settings: Settings | None = None,
    *,
    kube: KubeClient | None = None,
    clock: Callable[[], datetime] | None = None,
    freeze_gc: bool = False,
    vendor: Vendor | VendorSet | None = None,
) -> FastAPI:
    """The extender's HTTP app.

    ``kube`` replaces the client the settings would connect (in-cluster config or a
    kubeconfig); without either the extender runs standalone. ``clock`` is for tests.
    ``vendor`` replaces the vendors the settings name (one defined outside the registry,
    or a set of them).
    ``freeze_gc`` (for the process that serves the app, as ``vgpu-extender serve``
    does) freezes the objects alive once the runtime has started
    (:func:`freeze_startup_objects`), again once the first sync with the API server is
    done, and unfreezes them when it stops.
    """
    resolved = settings if settings is not None else Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = kube if kube is not None else await run_in_threadpool(connect_kube, resolved)
        runtime = Runtime.build(
            resolved,
            kube=client,
            vendor=vendor,
            hooks=operations.hooks(client),
            **({"clock": clock} if clock is not None else {}),
        )
        try:
            await run_in_threadpool(runtime.start)
        except BaseException:
            await run_in_threadpool(runtime.stop)
            raise
        app.state.runtime = runtime
        freezer = StartupFreezer(operations.metrics.gc_frozen.set) if freeze_gc else None
        if freezer is not None:
            freezer.freeze()
            if runtime.sync is not None:  # and what the first sync adds, once it is done
                runtime.sync.when_synced(freezer.freeze)
        try:
            await run_in_threadpool(operations.attach, runtime)
            yield
        finally:
            await run_in_threadpool(operations.detach)
            if freezer is not None:
                freezer.thaw()
            await run_in_threadpool(runtime.stop)

    app = ExtenderApp(
        title="vgpu-extender",
        summary="kube-scheduler extender sharing GPUs by virtual slices",
        lifespan=lifespan,
        # FastAPI's pages load their scripts from a CDN: blank offline. ``/docs`` is
        # served from local files instead (``ui.install_docs``); ReDoc is not shipped.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = resolved
    if resolved.admin_port is not None or resolved.metrics_port is not None:
        app.ports = PortRouter(resolved)
    operations = install_operations(app, resolved)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(webhook.router)
    app.include_router(admin_v1.router)
    app.include_router(gpushare.router)
    app.include_router(ui.router)
    ui.install_docs(app)
    app.add_exception_handler(Exception, exception_handler)
    for failure in STORE_FAILURES:  # one handler: 503 with Retry-After
        app.add_exception_handler(failure, store_error_handler)
    schema = app.openapi
    app.openapi = lambda: extender.document(schema())  # type: ignore[method-assign]
    return app
