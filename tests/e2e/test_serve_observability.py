"""`ledger serve` with the observability settings: a separate metrics listener,
JSON log lines, and spans exported over OTLP to a collector (a loopback stub)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from adapters.settings import load_settings
from api.http.auth import mint_token
from tests.support.http_helpers import DIRECTORY
from tests.support.http_server import free_port, ledger_command, wait_until_up


class Collector(BaseHTTPRequestHandler):
    """Accepts OTLP/HTTP trace exports and keeps their bodies."""

    received: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Collector.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


def test_metrics_listener_json_logs_and_otlp_export(tmp_path: Path) -> None:
    collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    port, metrics_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "OTEL_"))}
    env.update(
        {
            "LEDGER_SQLITE_PATH": str(tmp_path / "ledger.db"),
            "PYTHONUNBUFFERED": "1",
            "LEDGER_LOG_FORMAT": "json",
            "LEDGER_METRICS_LISTEN": f"127.0.0.1:{metrics_port}",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_SERVICE_NAME": "ledger-under-test",
        }
    )
    out_log, err_log = tmp_path / "stdout.log", tmp_path / "stderr.log"
    base = f"http://127.0.0.1:{port}"
    admin = {"Authorization": "Bearer " + mint_token(load_settings(), subject="ops", role="admin")}
    try:
        with out_log.open("wb") as out, err_log.open("wb") as err:
            process = subprocess.Popen(
                [*ledger_command(), "serve", "--port", str(port)],
                cwd=tmp_path,
                env=env,
                stdout=out,
                stderr=err,
            )
            try:
                wait_until_up(process, base + "/healthz", err_log)
                assert (
                    httpx.put(
                        base + DIRECTORY + "/actors/alice", json={"enabled": True}, headers=admin
                    ).status_code
                    == 200
                )
                assert httpx.get(base + "/metrics").status_code == 401
                separate = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics")
                assert separate.status_code == 200
                assert "ledger_http_request_duration_seconds_count" in separate.text
                assert 'route="/api/conversational/directory/actors/{actor_id}"' in separate.text
                for _ in range(200):  # the batch processor exports every ~100 ms
                    if any(
                        b"/api/conversational/directory" in body for _, body in Collector.received
                    ):
                        break
                    threading.Event().wait(0.1)
            finally:
                process.terminate()
                process.wait(timeout=15)
    finally:
        collector.shutdown()

    assert Collector.received, "no OTLP export reached the collector"
    assert {path for path, _ in Collector.received} == {"/v1/traces"}
    body = b"".join(body for _, body in Collector.received)
    assert b"ledger-under-test" in body and b"/api/conversational/directory" in body
    assert admin["Authorization"].split()[1].encode() not in body

    lines = [json.loads(line) for line in err_log.read_text().splitlines() if line.startswith("{")]
    assert lines, err_log.read_text()
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
