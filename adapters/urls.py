"""Checks every configured URL shares: a real port and a host in ASCII.

A port outside 1..65535 only fails when the first request is made (``urlsplit``
accepts it and raises on ``.port``); a host with a non-ASCII character may be
a look-alike of another (a Cyrillic letter in place of a Latin one), so a configured
host is written in ASCII, an internationalized name in its ``xn--`` form.
"""

from __future__ import annotations

from urllib.parse import SplitResult

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def authority_problem(parts: SplitResult) -> str | None:
    """What is wrong with a URL's host or port, or None when both are sound."""
    try:
        port = parts.port
    except ValueError:
        return "the port must be a number from 1 to 65535"
    if port == 0:
        return "the port must be a number from 1 to 65535"
    if not parts.netloc.isascii():
        return (
            "the host must be ASCII (write an internationalized name in its "
            "xn-- form; a non-ASCII host can be a look-alike of another)"
        )
    return None
