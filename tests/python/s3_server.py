"""A local S3 server for the tests: moto's ThreadedMotoServer on 127.0.0.1, and in
front of it a small proxy that injects faults and counts requests.

Started by the Rust tests (and the Python ones) as
``python tests/python/s3_server.py [BUCKET...]``. It creates the buckets, prints
one JSON line ``{"moto": PORT, "proxy": PORT}`` and serves until its standard
input is closed (so it never outlives the test that started it).

The proxy forwards every request to moto, except that ``/__proxy__/`` paths
control it (plain HTTP, answered with JSON):

- ``POST /__proxy__/fail?status=503&count=N&method=PUT&path=SUBSTRING``: answer
  the next N matching requests with that status (an S3 error body) instead of
  forwarding them;
- ``POST /__proxy__/down?after=N&method=PUT``: forward N more matching requests,
  then close every connection without an answer (the server is gone) until
  ``POST /__proxy__/up``;
- ``POST /__proxy__/race?path=SUBSTRING`` with a body: before forwarding the
  next PUT whose path contains SUBSTRING, write that body to the same object
  (another writer committing between a client's read and its write);
- ``POST /__proxy__/hold?method=GET&path=SUBSTRING``: the next matching request
  waits before it is forwarded, until ``POST /__proxy__/release``; ``GET
  /__proxy__/held`` answers ``true`` once it has arrived and waits (a request
  in flight at a moment the test chooses, without a timer);
- ``POST /__proxy__/delay?ms=N``: every request forwarded from now on waits N
  milliseconds first, each on its own (a store far away, for the benchmarks;
  ``ms=0`` ends it, as does a reset);
- ``GET /__proxy__/log``: every request since the last ``POST /__proxy__/reset``
  as ``[method, path, status]`` (status 0 for a dropped connection);
- ``GET /__proxy__/object?bucket=B&key=K`` (the object's bytes, or 404),
  ``POST /__proxy__/object?bucket=B&key=K`` with a body (writes it; with
  ``&keep_metadata=1`` keeping the user metadata of the object it replaces), and
  ``GET /__proxy__/uploads?bucket=B`` (the keys of the multipart uploads in
  progress, as JSON): what a test checks or prepares, done with moto's own
  credentials.

Nothing is sent anywhere but 127.0.0.1.
"""

import http.client
import http.server
import json
import logging
import socketserver
import sys
import threading
import time
import urllib.parse

from moto.server import ThreadedMotoServer

HOP_HEADERS = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "content-length",
}


class State:
    def __init__(self, moto_port, client):
        self.moto_port = moto_port
        self.client = client
        self.lock = threading.Lock()
        self.failures = []  # [status, remaining, method, path]
        self.down_after = None  # (remaining, method) or "down"
        self.races = []  # [path, body]
        self.log = []
        self.hold = None  # [method, path] of the request to hold
        self.holding = False  # the held request arrived and waits
        self.released = threading.Event()
        self.delay = 0.0  # seconds each forwarded request waits first

    def decide(self, method, path):
        """What to do with a request: ("forward",), ("fail", status) or ("drop",)."""
        with self.lock:
            if self.down_after == "down":
                return ("drop",)
            if self.down_after is not None:
                remaining, down_method = self.down_after
                if down_method in (None, method):
                    if remaining == 0:
                        self.down_after = "down"
                        return ("drop",)
                    self.down_after = (remaining - 1, down_method)
            for failure in self.failures:
                status, remaining, fail_method, fail_path = failure
                if remaining > 0 and fail_method in (None, method) and fail_path in path:
                    failure[1] -= 1
                    return ("fail", status)
            return ("forward",)

    def race(self, method, path):
        """The body another writer puts first, if a race is armed for this PUT."""
        with self.lock:
            if method != "PUT":
                return None
            for race in self.races:
                if race[0] in path:
                    self.races.remove(race)
                    return race[1]
            return None

    def held(self, method, path):
        """Whether this request is the one to hold (then it is no longer armed)."""
        with self.lock:
            if self.hold is None or self.hold[0] not in (None, method) or self.hold[1] not in path:
                return False
            self.hold = None
            self.holding = True
            return True

    def record(self, method, path, status):
        with self.lock:
            self.log.append([method, path, status])


def make_handler(state):
    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _reply(self, status, body, headers=()):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _control(self, body):
            url = urllib.parse.urlparse(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            action = url.path[len("/__proxy__/"):]
            if action == "object" and self.command == "GET":
                try:
                    data = state.client.get_object(Bucket=query["bucket"], Key=query["key"])
                except state.client.exceptions.NoSuchKey:
                    return self._reply(404, b"")
                return self._reply(200, data["Body"].read())
            if action == "object":
                extra = {}
                if query.get("keep_metadata"):
                    # Bytes changed in the store: the metadata (the checksum it
                    # was uploaded with) stays.
                    head = state.client.head_object(Bucket=query["bucket"], Key=query["key"])
                    extra["Metadata"] = head["Metadata"]
                state.client.put_object(
                    Bucket=query["bucket"], Key=query["key"], Body=body, **extra
                )
                return self._reply(200, b"{}")
            if action == "uploads":
                listed = state.client.list_multipart_uploads(Bucket=query["bucket"])
                keys = [upload["Key"] for upload in listed.get("Uploads", [])]
                return self._reply(200, json.dumps(keys).encode())
            with state.lock:
                if action == "fail":
                    state.failures.append(
                        [
                            int(query.get("status", 503)),
                            int(query.get("count", 1)),
                            query.get("method"),
                            query.get("path", ""),
                        ]
                    )
                elif action == "down":
                    state.down_after = (int(query.get("after", 0)), query.get("method"))
                elif action == "race":
                    state.races.append([query.get("path", ""), body])
                elif action == "up":
                    state.down_after = None
                elif action == "hold":
                    state.hold = [query.get("method"), query.get("path", "")]
                    state.holding = False
                    state.released.clear()
                elif action == "release":
                    state.released.set()
                elif action == "delay":
                    state.delay = float(query.get("ms", 0)) / 1000
                elif action == "reset":
                    state.log = []
                    state.failures = []
                    state.races = []
                    state.hold = None
                    state.released.set()
                    state.delay = 0.0
                elif action in ("log", "held"):
                    pass
                else:
                    return self._reply(404, b"{}")
                answers = {"log": state.log, "held": state.holding}
                body = json.dumps(answers.get(action, {"ok": True})).encode()
            self._reply(200, body, [("Content-Type", "application/json")])

        def _handle(self):
            if self.path.startswith("/__proxy__/"):
                return self._control(self._body())
            body = self._body()
            if state.delay:
                time.sleep(state.delay)
            decision = state.decide(self.command, self.path)
            if decision[0] == "drop":
                state.record(self.command, self.path, 0)
                self.close_connection = True
                # Close without an answer, as a server that went away.
                self.connection.shutdown(2)
                return
            if decision[0] == "fail":
                status = decision[1]
                state.record(self.command, self.path, status)
                error = (
                    "<?xml version='1.0' encoding='UTF-8'?><Error><Code>"
                    + ("SlowDown" if status == 503 else "InternalError")
                    + "</Code><Message>injected by the test proxy</Message></Error>"
                ).encode()
                return self._reply(status, error, [("Content-Type", "application/xml")])
            if state.held(self.command, self.path):
                # Bounded, so that a test that never releases it fails rather
                # than hangs the server.
                state.released.wait(timeout=300)
            other = state.race(self.command, self.path)
            if other is not None:
                path = urllib.parse.unquote(urllib.parse.urlparse(self.path).path)
                bucket, key = path.lstrip("/").split("/", 1)
                state.client.put_object(Bucket=bucket, Key=key, Body=other)
            upstream = http.client.HTTPConnection("127.0.0.1", state.moto_port, timeout=120)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            headers["Content-Length"] = str(len(body))
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            upstream.close()
            state.record(self.command, self.path, response.status)
            passed = [
                (k, v) for k, v in response.getheaders() if k.lower() not in HOP_HEADERS
            ]
            self._reply(response.status, data, passed)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    return Proxy


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client that gave up on a connection the proxy dropped on purpose.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


def main():
    # moto's server logs every request on stderr.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    buckets = sys.argv[1:] or ["bcd-test"]
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    _, moto_port = moto.get_host_and_port()
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{moto_port}",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    for bucket in buckets:
        client.create_bucket(Bucket=bucket)
    state = State(moto_port, client)
    proxy = Server(("127.0.0.1", 0), make_handler(state))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    print(json.dumps({"moto": moto_port, "proxy": proxy.server_address[1]}), flush=True)
    # Serve until the parent closes our stdin (or dies).
    sys.stdin.read()
    proxy.shutdown()
    moto.stop()


if __name__ == "__main__":
    main()
