// See include/CVigilEarlySignals.h for why this exists.
//
// Policy (written down for daemon authors in Sources/VigilEarlySignals/EarlySignals.swift too):
// - SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2 and every real-time signal (SIGRTMIN..SIGRTMAX:
//   `--reload-signal` may name any of them) are blocked from here on; the daemon takes the ones it
//   owns from a signalfd. Each real-time signal queued is charged to a user's
//   RLIMIT_SIGPENDING until taken: VigilEventLoop's loop takes every blocked real-time signal
//   through its signalfd and discards (and counts) the ones the daemon does not own.
// - Descriptors 0, 1 and 2 that are closed at exec get /dev/null, before anything can open a
//   descriptor that would become stdin, stdout or stderr (log lines would go into it).
// - SIGPIPE is ignored: a write to a closed pipe (stderr to a vanished reader) fails with EPIPE
//   instead of killing the daemon.
// - SIGXFSZ is ignored: a write past RLIMIT_FSIZE fails with EFBIG, which the state store
//   reports as a failed write, instead of killing the daemon with a core dump.
// - SIGTTOU is ignored: a daemon started from a terminal with `stty tostop` writes its log
//   lines instead of being stopped by the first one.
#define _GNU_SOURCE
#include "CVigilEarlySignals.h"
#include "CVigilEventLoop.h"

#include <signal.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

static sigset_t original_mask;
static struct sigaction original_pipe, original_file_size, original_terminal_output;
static bool saved;
static uint64_t blocked_at;

static void cvigil_early_signals_block(void) {
    // VigilEventLoop's one copy (its loop calls it again, for a daemon that does not link this
    // product); here it runs before any other code.
    cvigil_loop_open_standard_descriptors();
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGUSR2);
    for (int signal = SIGRTMIN; signal <= SIGRTMAX; signal++) sigaddset(&block, signal);
    if (sigprocmask(SIG_BLOCK, &block, &original_mask) != 0) return;
    struct sigaction ignore = {.sa_handler = SIG_IGN};
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &original_pipe);
    sigaction(SIGXFSZ, &ignore, &original_file_size);
    // A daemon started from a shell whose terminal has `stty tostop` would otherwise be stopped
    // by its first log line (SIGTTOU), and then answer nothing, SIGTERM included, until a SIGCONT.
    sigaction(SIGTTOU, &ignore, &original_terminal_output);
    saved = true;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    blocked_at = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

// In the executable's preinit array: the dynamic loader calls it once every library is loaded
// and relocated, before any library's constructor (the Swift runtime's among them) and before
// `main`. A constructor, even of priority 101, would run only after all of those.
__attribute__((section(".preinit_array"), used)) static void (*const cvigil_early_signals_entry)(void) =
    cvigil_early_signals_block;

uint64_t cvigil_early_signals_blocked_at(void) { return blocked_at; }

void cvigil_early_signals_restore(void) {
    if (!saved) return;
    saved = false;
    sigaction(SIGPIPE, &original_pipe, NULL);
    sigaction(SIGXFSZ, &original_file_size, NULL);
    sigaction(SIGTTOU, &original_terminal_output, NULL);
    sigprocmask(SIG_SETMASK, &original_mask, NULL);
}
