"""The library's own random generator.

mqcore draws reconnect jitter and automatic routing ids from this generator, never from the state
of the application's ``random`` module (libzmq keeps its own generator too): an application that
seeds ``random`` gets the same sequence with mqcore sockets running as without them, and the I/O
thread's reconnect attempts do not advance it behind the application's back.
"""

from __future__ import annotations

import random

RNG = random.Random()
