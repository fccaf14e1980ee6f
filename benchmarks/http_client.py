"""HTTP client benchmark: the client-side CPU of one request, our pooled client against httpx's default.

    .venv/bin/python benchmarks/http_client.py                 # 3,000 requests per client, 3 rounds

A rollout's model calls and tool steps are small JSON POSTs to loopback servers, so the client's own CPU per
request is a direct share of a rollout's. This sends the same POST (a 60-byte JSON body, an 11-byte JSON answer)
to a bare ASGI app under uvicorn in another process, one request at a time, and reads this process's CPU time
(user + system, so the socket calls count too) around each client's requests:

- `pooled` is `lib.http_pool.pooled_client`, the hot paths' client (plain http on `KeepAliveTransport`);
- `httpx-default` is `httpx.AsyncClient()` with its default transport (httpcore, h11, anyio);
- `transport-only` calls `KeepAliveTransport.handle_async_request` directly, without httpx's client layer.

Rounds alternate the clients, so a drift in the machine's speed falls on all of them; the report gives the
median of the rounds. Results: JSON on stdout and in `benchmarks/results/http_client.{json,md}` (git-ignored).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import RESULTS_DIR, command_line, load_average, machine, now_iso, write_report
from eval_pipelines.lib.aio import run as run_async
from eval_pipelines.lib.http_pool import pooled_client
from eval_pipelines.lib.serving import free_port

BODY = b'{"action": {"tool_name": "send_email", "parameters": {"to": "a@b.c"}}}'
HEADERS = {"content-type": "application/json"}
WARMUP_REQUESTS = 300
CLIENTS = ("pooled", "httpx-default", "transport-only")

SERVER = """
import uvicorn
ANSWER = b'{"ok": true}'
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": ANSWER})
uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", access_log=False)
"""


def start_server(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen([sys.executable, "-c", SERVER.replace("PORT", str(port))])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.post(f"http://127.0.0.1:{port}/", content=b"{}", timeout=1.0)
            return server
        except httpx.TransportError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("the benchmark's server did not start within 20 s")


async def microseconds_per_request(client_name: str, url: httpx.URL, requests: int) -> float:
    """This process's CPU time per request, after a warm-up on the same connection."""
    client = pooled_client(4, timeout=10.0) if client_name != "httpx-default" else httpx.AsyncClient(timeout=10.0)
    try:
        if client_name == "transport-only":
            transport = client._transport
            timeouts = {"connect": 10.0, "read": 10.0, "write": 10.0, "pool": 10.0}

            async def send() -> None:
                request = httpx.Request("POST", url, content=BODY, headers=HEADERS, extensions={"timeout": timeouts})
                response = await transport.handle_async_request(request)
                await response.aread()

        else:

            async def send() -> None:
                response = await client.post(url, content=BODY, headers=HEADERS)
                assert response.status_code == 200

        for _ in range(WARMUP_REQUESTS):
            await send()
        started = time.process_time()
        for _ in range(requests):
            await send()
        return (time.process_time() - started) / requests * 1e6
    finally:
        await client.aclose()


def run(requests: int, rounds: int) -> dict[str, Any]:
    port = free_port()
    server = start_server(port)
    load_before = load_average()
    url = httpx.URL(f"http://127.0.0.1:{port}/workspaces/w/step")
    per_round: dict[str, list[float]] = {name: [] for name in CLIENTS}
    try:
        for round_index in range(rounds):
            order = CLIENTS[round_index % len(CLIENTS) :] + CLIENTS[: round_index % len(CLIENTS)]
            for name in order:
                per_round[name].append(round(run_async(microseconds_per_request(name, url, requests)), 1))
    finally:
        server.terminate()
        server.wait(10)
    return {
        "benchmark": "http_client",
        "command": command_line(),
        "when": now_iso(),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "requests_per_round": requests,
        "rounds": rounds,
        "cpu_us_per_request": {name: statistics.median(values) for name, values in per_round.items()},
        "every_round": per_round,
    }


def markdown(report: dict[str, Any]) -> str:
    load = f"load {report['load_average_before'][0]} -> {report['load_average_after'][0]}"
    lines = [
        f"Client CPU per request (`{report['command']}`; {report['requests_per_round']:,} requests per client and "
        f"round, median of {report['rounds']} rounds, {load})",
        "",
        "| client | CPU us per request (median) | every round |",
        "|---|---|---|",
    ]
    for name, value in report["cpu_us_per_request"].items():
        every = ", ".join(str(v) for v in report["every_round"][name])
        lines.append(f"| {name} | **{value}** | {every} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS_DIR), help="where http_client.{json,md} go ('' = nowhere)")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1:
        parser.error("--requests and --rounds must be at least 1")
    report = run(args.requests, args.rounds)
    write_report("http_client", report, markdown(report), Path(args.out) if args.out else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
