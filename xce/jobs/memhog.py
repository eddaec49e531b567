"""A job that holds memory in a shape over time: `python -m xce.jobs.memhog STEPS...`.

Each step is ``MB:SECONDS`` — grow (or shrink) the resident set to MB and hold
it for SECONDS — or ``MB:@PATH``: hold it until the file PATH exists (a test's
cue, instead of a guess at how long the step must last).  Pages are touched so
they are really resident.  Used by the
demo and the tests to make usage land under, at, above and across a reservation.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> int:
    held: list[bytearray] = []
    for step in argv:
        mb_s, _, secs_s = step.partition(":")
        target = int(float(mb_s)) * 1024 * 1024
        have = sum(len(b) for b in held)
        while have < target:
            chunk = bytearray(min(16 * 1024 * 1024, target - have))
            for i in range(0, len(chunk), 4096):
                chunk[i] = 1
            held.append(chunk)
            have += len(chunk)
        while held and have > target:
            have -= len(held.pop())
        if secs_s.startswith("@"):
            print(f"holding {have >> 20} MB until {secs_s[1:]} exists", flush=True)
            while not os.path.exists(secs_s[1:]):
                time.sleep(0.05)
            continue
        print(f"holding {have >> 20} MB for {secs_s or 0}s", flush=True)
        time.sleep(float(secs_s or 0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
