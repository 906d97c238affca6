"""A rank dies after the rendezvous, before MPI starts (argv[1] = that rank): the others'
init_process_group must fail within seconds instead of waiting inside MPI_Init forever."""

import os
import sys
import time

from prelude import LIB, init, write

rank = int(os.environ["RANK"])
victim = int(sys.argv[1])
if LIB == "ember" and rank == victim:
    import ember.distributed._mpi as engine

    def die(*args, **kwargs):
        time.sleep(0.5)  # the others are in MPI_Init by now
        os._exit(3)

    engine.start_with_pmi_server = die
start = time.monotonic()
try:
    init(timeout_s=120)
    write(rank, {"outcome": "joined"})
except BaseException as err:  # noqa: BLE001 - the report is the point
    write(rank, {"outcome": type(err).__name__, "message": str(err)[:300], "seconds": time.monotonic() - start})
