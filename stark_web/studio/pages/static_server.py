"""A throwaway HTTP server for the pages' ES modules on their own: the checkout's static/ under /static/ and one HTML
page at /. The tree's browser test (tests/web/test_live_tree.py) and its benchmark (benchmarks/ui_tree.py) drive
static/js/tree.js through it without Django; nothing in the product serves with it."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def serve_static(page: str) -> tuple[ThreadingHTTPServer, int]:
    """Serve static/ under /static/ and `page` at /, on a free port of 127.0.0.1: (server, port)."""

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path in ("/", "/index.html"):
                body = page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

        def log_message(self, *args: Any) -> None:
            pass

    Handler.extensions_map = {**Handler.extensions_map, ".js": "text/javascript", ".mjs": "text/javascript"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(ROOT)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]
