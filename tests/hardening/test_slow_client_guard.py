"""The slow-client protocol on a real uvicorn server on loopback: each bound
closes the connection it is for, and nothing a well-behaved client does
(keep-alive, pipelining, a slow answer) is ever cut. Every wait is bounded."""

from __future__ import annotations

import time

from tests.support.guarded_server import answers, closed_within, connect, guarded_server

DEADLINE = 0.4
BOUND = DEADLINE + 3.0  # generous for a loaded machine
GET = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def test_half_sent_headers_are_closed_at_the_header_deadline() -> None:
    with guarded_server(header_timeout=DEADLINE, body_timeout=30, max_connections=50) as port:
        sock = connect(port)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        assert closed_within(sock, BOUND)
        silent = connect(port)  # a connection that sends nothing at all
        assert closed_within(silent, BOUND)


def test_a_half_sent_body_is_closed_at_the_body_deadline() -> None:
    with guarded_server(header_timeout=30, body_timeout=DEADLINE, max_connections=50) as port:
        sock = connect(port)
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        assert closed_within(sock, BOUND)


def test_the_next_request_on_a_kept_alive_connection_has_its_own_header_deadline() -> None:
    with guarded_server(header_timeout=DEADLINE, body_timeout=30, max_connections=50) as port:
        sock = connect(port)
        sock.sendall(GET)
        assert answers(sock, 1) == 1
        sock.sendall(b"GET / HT")  # the next request starts, and stalls
        assert closed_within(sock, BOUND)


def test_keep_alive_pipelining_and_a_slow_answer_are_never_cut() -> None:
    with guarded_server(header_timeout=DEADLINE, body_timeout=DEADLINE, max_connections=50) as port:
        sock = connect(port)
        for _ in range(3):  # one request after the other, each past the last's deadline
            sock.sendall(GET)
            assert answers(sock, 1) == 1
            time.sleep(DEADLINE)  # idle between requests: keep-alive's bound, not ours
        sock.sendall(GET + b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" + GET)
        assert answers(sock, 3) == 3
        # the app takes longer than both deadlines: the request is in, the answer comes
        sock.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answers(sock, 1) == 1


def test_at_the_cap_a_newcomer_evicts_the_longest_waiting_sender() -> None:
    with guarded_server(header_timeout=30, body_timeout=30, max_connections=4) as port:
        slow = []
        for _ in range(4):
            sock = connect(port)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            slow.append(sock)
            time.sleep(0.05)  # an order of arrival to evict by
        served = connect(port)
        served.sendall(GET)
        assert answers(served, 1) == 1  # the newcomer is served at once
        assert closed_within(slow[0], BOUND)  # the oldest sender made room, long before 30 s
        assert not closed_within(slow[-1], 0.2)
        for sock in [*slow, served]:
            sock.close()
