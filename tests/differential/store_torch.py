# tests/differential/store_torch.py HOST PORT — the torch side of the store
# family of `make differential` (tests/store_diff.c): torch's own TCPStore
# server (torch 1.13: TCPStoreMasterDaemon) on HOST:PORT (0: a free port),
# started once, with no workers to wait for. Prints "port N" when it
# listens, then serves until its stdin closes (the driver ends, however it
# ends), and exits 0. Run it with scripts/torch-python.
import datetime
import sys

import torch.distributed as dist


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    store = dist.TCPStore(host, port, None, True,
                          timeout=datetime.timedelta(seconds=60),
                          wait_for_workers=False)
    print("port %d" % store.port, flush=True)
    sys.stdin.read()
    del store


if __name__ == "__main__":
    main()
