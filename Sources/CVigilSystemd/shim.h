// The C surface of libsystemd that Vigil uses. Never part of Vigil's API.
//
// Why shims: `sd_journal_send` and `sd_notifyf` are variadic and do not import into Swift, so
// Vigil uses the non-variadic `sd_journal_sendv` and `sd_notify` instead; the `static inline`
// wrappers below exist only where Swift cannot express a C construct directly.
#ifndef CVIGILSYSTEMD_SHIM_H
#define CVIGILSYSTEMD_SHIM_H

#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <sys/uio.h>
#include <sys/signalfd.h>
#include <signal.h>
#include <time.h>

// SD_LISTEN_FDS_START is a macro; Swift imports it, but keep one named accessor for clarity.
static inline int cvigil_listen_fds_start(void) { return SD_LISTEN_FDS_START; }

// SIGRTMIN/SIGRTMAX are function calls in glibc (`__libc_current_sigrtmin()`), not constants,
// so Swift does not import them.
static inline int cvigil_sigrtmin(void) { return SIGRTMIN; }
static inline int cvigil_sigrtmax(void) { return SIGRTMAX; }

#endif
