"""Serve a ``MetricSet`` at ``http://HOST:PORT/metrics`` (prometheus_client's WSGI server in a
daemon thread). 127.0.0.1 unless the caller says otherwise; port 0 takes a free one."""
from __future__ import annotations

import errno

from prometheus_client import start_http_server

from workbench.errors import Problem, ScenarioError
from workbench.monitor.metrics import MetricSet


class Endpoint:
    """A running exporter: its URL, and ``close()`` to stop serving."""

    def __init__(self, metrics: MetricSet, host: str = "127.0.0.1", port: int = 0,
                 option: str = "--metrics-port") -> None:
        try:
            self._server, self._thread = start_http_server(port, addr=host,
                                                           registry=metrics.registry)
        except OSError as exc:
            why = ("is already in use" if exc.errno == errno.EADDRINUSE
                   else f"cannot be opened ({exc.strerror})")
            raise ScenarioError([Problem(option, port, f"{host}:{port} {why}; choose another "
                                                       "port, or 0 for a free one")]) from None
        self.host, self.port = host, self._server.server_port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "Endpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
