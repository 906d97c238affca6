"""Joins with the given timeout and reports the error init raises (a rank never arrives)."""

import sys
import time

from prelude import error_of, init, write

start = time.monotonic()
message = []


def go():
    try:
        init(timeout_s=float(sys.argv[1]))
    except Exception as err:
        message.append(str(err))
        raise


err = error_of(go)
write(int(__import__("os").environ["RANK"]), {"error": err, "message": message, "waited": time.monotonic() - start})
