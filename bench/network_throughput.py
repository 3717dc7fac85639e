"""Loopback throughput of ``FramedConnection``: prints numbers, asserts nothing.

Run: ``.venv/bin/python bench/network_throughput.py [--seconds 2]``
"""

from __future__ import annotations

import argparse
import queue
import threading
import time

from cairn.runtime.network import FramedConnection, FrameKind, Listener, connect, new_secret


def measure(
    sender: FramedConnection,
    receiver: FramedConnection,
    frame_size: int,
    batch: int,
    seconds: float,
) -> tuple[float, float]:
    """Return (MB/s, frames/s) sending ``batch`` frames per call for about ``seconds``."""
    payload = bytes(frame_size)
    frames = [(FrameKind.DATA, i, payload) for i in range(batch)]
    sent = 0
    done = threading.Event()
    counted: queue.Queue[int] = queue.Queue()

    def drain() -> None:
        received = 0
        while True:
            kind, _, _ = receiver.recv()
            if kind == FrameKind.CONTROL:
                break
            received += 1
        counted.put(received)
        done.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        if batch == 1:
            sender.send(FrameKind.DATA, 0, payload)
        else:
            sender.send_many(frames)
        sent += batch
    sender.send(FrameKind.CONTROL, 0)
    done.wait()
    elapsed = time.perf_counter() - start
    assert counted.get() == sent
    return sent * frame_size / elapsed / 1e6, sent / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()

    secret = new_secret()
    accepted: queue.Queue[FramedConnection] = queue.Queue()
    with Listener("127.0.0.1", secret, lambda conn, hello: accepted.put(conn)) as listener:
        client = connect(listener.address, secret, hello=b"bench")
        server = accepted.get(timeout=5)
        cases = [(65536, 16), (65536, 1), (1024, 256), (100, 1024), (100, 1)]
        for frame_size, batch in cases:
            mb_s, frames_s = measure(client, server, frame_size, batch, args.seconds)
            call = f"send_many x{batch}" if batch > 1 else "send"
            print(
                f"{frame_size:>6} B frames, {call:<15}: "
                f"{mb_s:9.1f} MB/s  {frames_s:12,.0f} frames/s"
            )
        client.close()
        server.close()


if __name__ == "__main__":
    main()
