"""The test receiver's mode switch is atomic: a request reading the mode file
while a test switches it never finds it empty (an empty file reads as "ok",
which once made the webhook SIGKILL test see a fourth acknowledgement where the
``ok:3`` mode allows three)."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.support.webhook_receiver import Receiver


def test_a_reader_never_sees_the_mode_file_between_two_modes(tmp_path: Path) -> None:
    receiver = Receiver(tmp_path, "whsec_unused")  # not started: only its mode file
    seen: set[str] = set()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                seen.add(receiver.mode_file.read_text())
            except FileNotFoundError:  # never: os.replace swaps the name atomically
                seen.add("<missing>")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(3000):
            receiver.set_mode("500" if n % 2 else "ok:3")
    finally:
        done.set()
        reader.join(10)
    assert seen <= {"500", "ok:3", "ok"}, seen
