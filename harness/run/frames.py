"""Replies from a worker process to crashlab's own process: framed, signed, and checked.

A reply is ``!II`` (its header's length, its payload's length), a MAC, the JSON header and the
payload. The MAC is keyed BLAKE2b (:func:`mac`) with a secret the pool makes before it forks its
workers (``secrets.token_bytes(32)``), over the reply's sequence number in that worker's replies (no
replay, no reorder), the worker's pid (no reply moved between workers), the lengths, the header and
the payload. Any other process that writes into a worker's result pipe (through ``/proc/PID/fd``, or a
descriptor it inherited) cannot sign what it writes unless it can read the worker's memory: its
reply is :class:`Forged`, and what that worker returned is not trusted.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from typing import IO

MAX_FRAME = 1 << 30         # a worker's reply larger than this is a lost item, not crashlab's memory
FRAME = struct.Struct("!II")
MAC_SIZE = 32
_SIGNED = struct.Struct("!QiII")   # what the MAC covers before the header: sequence number, pid, lengths

FORGED = ("the worker process's result pipe held a reply that worker did not sign: another process wrote "
          "into it, so nothing that worker returned is trusted; its worker process was killed")


class Forged(Exception):
    """A reply whose MAC is not the worker's."""


class TooLarge(Exception):
    """A reply longer than MAX_FRAME."""


def new_key() -> bytes:
    return secrets.token_bytes(32)


def mac(key: bytes, seq: int, pid: int, head: bytes, payload: bytes) -> bytes:
    signed = hashlib.blake2b(key=key, digest_size=MAC_SIZE, person=b"crashlab-reply")
    signed.update(_SIGNED.pack(seq, pid, len(head), len(payload)))
    signed.update(head)
    signed.update(payload)
    return signed.digest()


class Signer:
    """In a worker: writes its replies, each signed with the next sequence number."""

    def __init__(self, out: IO[bytes], key: bytes, pid: int) -> None:
        self.out, self.key, self.pid, self.seq = out, key, pid, 0

    def write(self, head: bytes, payload: bytes = b"") -> None:
        signed = mac(self.key, self.seq, self.pid, head, payload)
        self.seq += 1
        self.out.write(FRAME.pack(len(head), len(payload)) + signed + head)
        if payload:
            self.out.write(payload)


def take(buf: bytearray, key: bytes, seq: int, pid: int) -> tuple[bytes, bytes] | None:
    """The next whole reply at the start of ``buf`` (removed from it) as (header, payload), signed by
    worker ``pid`` as its reply number ``seq``; None until it has all arrived. Raises TooLarge, Forged."""
    if len(buf) < FRAME.size:
        return None
    head_len, body_len = FRAME.unpack_from(buf)
    if head_len + body_len > MAX_FRAME:
        raise TooLarge(f"the worker process wrote a reply larger than {MAX_FRAME >> 20} MiB")
    start = FRAME.size + MAC_SIZE
    end = start + head_len + body_len
    if len(buf) < end:
        return None
    head, payload = bytes(buf[start:start + head_len]), bytes(buf[start + head_len:end])
    if not hmac.compare_digest(bytes(buf[FRAME.size:start]), mac(key, seq, pid, head, payload)):
        raise Forged(FORGED)
    del buf[:end]
    return head, payload
