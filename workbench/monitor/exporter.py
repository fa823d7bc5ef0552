"""Serve a ``MetricSet`` at ``http://HOST:PORT/metrics`` from a small threaded WSGI server in a
daemon thread. 127.0.0.1 unless the caller says otherwise; port 0 takes a free one.

Built from prometheus_client's pieces (``make_wsgi_app`` for the exposition and its content
negotiation, ``ThreadingWSGIServer``) rather than ``start_http_server``, whose handler has no
timeout and answers every path: here only ``GET``/``HEAD /metrics`` is served, a connection that
says nothing is dropped after ``REQUEST_TIMEOUT_S`` (any connection after
``CONNECTION_LIMIT_S``), and at most ``MAX_CONNECTIONS`` are open.
"""
from __future__ import annotations

import errno
import io
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from wsgiref.simple_server import WSGIRequestHandler

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from workbench.errors import Problem, ScenarioError
from workbench.monitor.metrics import MetricSet

# Each open connection holds a thread; without a timeout a client that connects and sends
# nothing (or half a request) holds one forever. A scrape is one request over a fresh
# connection answered in milliseconds, so 10 s of silence on a socket is never a real scraper
# (Prometheus' own default scrape timeout is 10 s as well).
REQUEST_TIMEOUT_S = 10.0
# The timeout bounds each silence, not a client that trickles a byte every few seconds: the
# whole connection is cut after this long (checked by the serve loop every half second).
CONNECTION_LIMIT_S = 30.0
# Prometheus scrapes one target over one connection at a time; 32 leaves room for a few
# scrapers and curl while bounding the threads a flood of connections can start. Over the cap
# a new connection is closed at once (the scraper retries at its next interval).
MAX_CONNECTIONS = 32
PATH = "/metrics"

_HOST_HINT = "give 127.0.0.1 for this machine only, or 0.0.0.0 for every interface"

WSGIApp = Callable[[dict, Callable], Iterable[bytes]]


def host_problem(host: str, option: str = "--host") -> Problem | None:
    """The problem with ``host`` that needs no lookup (an empty or blank address, which the
    socket layer would take as every interface), or None."""
    if not isinstance(host, str) or not host.strip():
        return Problem(option, host, f"an address to listen on is needed: {_HOST_HINT}")
    return None


def _text(start_response: Callable, status: str, body: str,
          headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    data = body.encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(data))), *(headers or [])])
    return [data]


def metrics_only(app: WSGIApp) -> WSGIApp:
    """``app`` at ``/metrics`` (any query string) for GET and HEAD; 404 elsewhere, 405 for other
    methods. make_wsgi_app itself answers any path, and HEAD with a 405."""
    def route(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != PATH:
            return _text(start_response, "404 Not Found", f"not found; the metrics are at {PATH}\n")
        method = environ.get("REQUEST_METHOD")
        if method == "GET":
            return app(environ, start_response)
        if method == "HEAD":     # the GET answer's status and headers, without its body
            said: list = []

            def keep(status: str, headers: list, exc_info: object = None) -> None:
                said.extend((status, headers))
            body = b"".join(app({**environ, "REQUEST_METHOD": "GET"}, keep))
            start_response(said[0], [*said[1], ("Content-Length", str(len(body)))])
            return []
        return _text(start_response, "405 Method Not Allowed",
                     f"method not allowed; use GET {PATH}\n", [("Allow", "GET, HEAD")])
    return route


class _Handler(WSGIRequestHandler):
    """One connection: quiet, and bounded in time."""

    # StreamRequestHandler.setup puts this on the socket: every read (request line, headers)
    # and write (a client that never reads) gives up after it, and the connection is dropped.
    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: object) -> None:
        """Scrapes are not logged (one line per scrape would flood the monitor's stderr)."""

    def get_stderr(self) -> io.StringIO:
        # wsgiref prints a traceback there when a write times out (a client that stops
        # reading): hostile input, not a fault of ours, so it goes nowhere
        return io.StringIO()


class _Server(ThreadingWSGIServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` of them, each one closable."""

    def __init__(self, family: socket.AddressFamily, address: tuple, app: WSGIApp) -> None:
        self.address_family = family        # per instance: IPv4 or IPv6, from getaddrinfo
        self._lock = threading.Lock()
        self._open: dict[socket.socket, tuple[threading.Thread, float]] = {}   # -> opened at
        super().__init__(address, _Handler)
        self.set_app(app)

    def process_request(self, request: socket.socket, client_address: tuple) -> None:
        thread = threading.Thread(target=self.process_request_thread,
                                  args=(request, client_address),
                                  name="metrics-connection", daemon=True)
        with self._lock:
            full = len(self._open) >= MAX_CONNECTIONS
            if not full:
                self._open[request] = thread, time.monotonic()
        if full:        # the serve loop never waits on a client: refuse and go on accepting
            self.shutdown_request(request)
            return
        thread.start()

    def shutdown_request(self, request: socket.socket) -> None:
        with self._lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: object, client_address: object) -> None:
        # a timed-out, reset or half-closed client is routine here, not worth a traceback
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def service_actions(self) -> None:
        """Run by the serve loop between accepts: cut connections open too long."""
        expired = time.monotonic() - CONNECTION_LIMIT_S
        with self._lock:
            old = [request for request, (_, opened) in self._open.items() if opened < expired]
        _cut(old)

    def close_connections(self, timeout: float) -> None:
        """Cut every open connection (its thread then ends at once) and wait for the threads.
        Called after ``shutdown()``: the serve loop has stopped, so every thread has started."""
        with self._lock:
            live = list(self._open.items())
        _cut([request for request, _ in live])
        for _, (thread, _) in live:
            thread.join(timeout)


def _cut(requests: list[socket.socket]) -> None:
    """Shut connections down: their handlers' reads and writes fail at once, and they end."""
    for request in requests:
        try:
            request.shutdown(socket.SHUT_RDWR)
        except OSError:          # closed meanwhile by its own thread
            pass


class Endpoint:
    """A running exporter: its URL, and ``close()`` to stop serving.

    ``option`` and ``host_option`` name the port and host in the one-line errors (a
    ``ScenarioError``) raised when the address cannot be opened."""

    _server: _Server
    _thread: threading.Thread

    def __init__(self, metrics: MetricSet, host: str = "127.0.0.1", port: int = 0,
                 option: str = "--metrics-port", host_option: str = "--host") -> None:
        problem = host_problem(host, host_option)
        if problem is None and not 0 <= port <= 65535:
            problem = Problem(option, port, "a TCP port 1..65535, or 0 for a free one")
        if problem is None:
            problem = self._bind(metrics, host, port, option, host_option)
        if problem is not None:
            raise ScenarioError([problem])
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="metrics-server", daemon=True)
        self._thread.start()
        self.host, self.port = host, self._server.server_port

    def _bind(self, metrics: MetricSet, host: str, port: int, option: str,
              host_option: str) -> Problem | None:
        """Make ``self._server``; or say, in one line, why the address cannot be opened."""
        try:
            family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                          flags=socket.AI_PASSIVE)[0]
            self._server = _Server(family, address, metrics_only(make_wsgi_app(metrics.registry)))
        except socket.gaierror as exc:
            return Problem(host_option, host, f"cannot be resolved ({exc.strerror}); {_HOST_HINT}")
        except (UnicodeError, ValueError):      # idna refuses e.g. a label over 63 characters
            return Problem(host_option, host, f"is not a valid host name; {_HOST_HINT}")
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                return Problem(host_option, host,
                               f"is not an address of this machine; {_HOST_HINT}")
            why = ("is already in use" if exc.errno == errno.EADDRINUSE
                   else f"cannot be opened ({exc.strerror})")
            return Problem(option, port, f"{host}:{port} {why}; choose another port, or 0 for a "
                                         "free one")
        return None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host     # an IPv6 literal
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop accepting, cut open connections, and wait (briefly) for every thread."""
        self._server.shutdown()
        self._server.close_connections(timeout=5)
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "Endpoint":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
