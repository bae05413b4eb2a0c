// Blocks a daemon's signals before anything else in the process runs: the C half of the opt-in
// VigilEarlySignals product (its Swift API is `EarlySignals`).
//
// Why C: systemd may signal a service's main PID the moment it exists (`systemctl start
// --no-block` then `systemctl reload`, or `kill -HUP $MAINPID`). Until someone blocks SIGHUP, its
// default action kills the process, and the Swift runtime, the loader and `main` take several
// milliseconds before any Swift code can block it. A function in the executable's preinit array
// runs as soon as the dynamic loader has loaded and relocated the libraries, before any library
// constructor (the Swift runtime's) and before `main`, so a signal that arrives after it is
// queued until the daemon takes it from its signalfd.
#ifndef CVIGILEARLYSIGNALS_H
#define CVIGILEARLYSIGNALS_H

#include <stdint.h>

// CLOCK_MONOTONIC in nanoseconds when the constructor blocked the signals; 0 if it did not run.
uint64_t cvigil_early_signals_blocked_at(void);

// Gives a process that is not the daemon (a client subcommand) back what it was started with:
// the signal mask, and the dispositions of SIGPIPE, SIGXFSZ and SIGTTOU. A signal that was queued
// meanwhile is then delivered with its default action, as it would have been without the block.
void cvigil_early_signals_restore(void);

#endif
