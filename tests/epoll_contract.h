/* tests/epoll_contract.h — the readiness-set contract of ddp/sys.h
 * (ddp_sys_epoll_*), as one check run on every sys: POSIX, the simulator
 * (inside a task) and the emulation over poll. */
#ifndef DDP_TEST_EPOLL_CONTRACT_H
#define DDP_TEST_EPOLL_CONTRACT_H

#include "ddp/sys.h"

/* Runs the contract on sys over loopback sockets it makes and closes.
 * 0, or a negative code with the error context naming the broken clause.
 * emulated: sys has no epoll ops (the emulation cannot see a close or an
 * fd that is not a socket, so those two clauses are skipped). */
int ddp_test_epoll_contract(ddp_sys_t *sys, int emulated);

#endif
