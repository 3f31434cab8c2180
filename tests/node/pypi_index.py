"""A stand-in package index, run as a pod by tests/node/test_egress_node.py:
a PEP 503 "simple" index of the wheels in a directory, over HTTPS with the
certificate the test made (its own CA), and one JSON access-log line per
request on stdout: who asked (the peer address the index sees), what, and
the answer.

    pypi_index.py WHEELS_DIR CERT KEY [PORT]

    /simple/                 every project (links)
    /simple/<project>/       the project's wheels, each link with #sha256=…
    /files/<wheel>           the wheel

Only the standard library: it runs on the node's Debian images as they are.
"""
from __future__ import annotations

import hashlib
import html
import json
import os
import re
import signal
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def normalize(name: str) -> str:
    """PEP 503's name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def load(wheels: Path) -> dict[str, dict[str, tuple[Path, str]]]:
    """{project: {file name: (path, sha256)}}."""
    projects: dict[str, dict[str, tuple[Path, str]]] = {}
    for path in sorted(wheels.glob("*.whl")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        projects.setdefault(normalize(path.name.split("-", 1)[0]), {})[path.name] = (path, digest)
    return projects


def page(title: str, links: list[tuple[str, str]]) -> bytes:
    body = "".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a><br>\n' for href, text in links)
    return (f"<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            f"<title>{html.escape(title)}</title></head><body>\n{body}</body></html>\n").encode()


def handler(projects: dict[str, dict[str, tuple[Path, str]]]):
    files = {name: path for p in projects.values() for name, (path, _) in p.items()}

    class Index(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - the standard library's names
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            project = re.fullmatch(r"/simple/([^/]+)/?", path)
            wheel = re.fullmatch(r"/files/([^/]+)", path)
            if path in ("/simple", "/simple/"):
                self.answer(200, page("Simple index", [(f"/simple/{p}/", p) for p in sorted(projects)]), "text/html")
            elif project and normalize(project.group(1)) in projects:
                entries = projects[normalize(project.group(1))]
                links = [(f"/files/{name}#sha256={digest}", name) for name, (_, digest) in sorted(entries.items())]
                self.answer(200, page(f"Links for {project.group(1)}", links), "text/html")
            elif wheel and wheel.group(1) in files:
                self.answer(200, files[wheel.group(1)].read_bytes(), "application/octet-stream")
            else:
                self.answer(404, b"not found\n", "text/plain")

        # uv asks a wheel's size (and whether ranges are served) with HEAD
        # first; this index serves whole files only.
        do_HEAD = do_GET  # noqa: N815

        def answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            print(json.dumps({"client": self.client_address[0], "method": self.command, "path": self.path,
                              "status": status, "bytes": len(body)}), flush=True)

        def log_message(self, *args) -> None:  # the JSON line above is the log
            pass

    return Index


def main() -> None:
    wheels, cert, key = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    port = int(sys.argv[4]) if len(sys.argv) > 4 else 8443
    # As PID 1 the process would ignore SIGTERM: a pod's deletion would wait its grace period.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    projects = load(wheels)
    server = ThreadingHTTPServer(("0.0.0.0", port), handler(projects))
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    print(json.dumps({"listening": port, "projects": len(projects)}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
