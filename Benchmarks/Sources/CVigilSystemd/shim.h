// The raw libsystemd calls that the in-process benchmarks compare Vigil against
// (`sd_journal_sendv`, `sd_notify`; their variadic siblings do not import into Swift). Only the
// benchmarks link libsystemd: Vigil itself speaks the notify and journal protocols.
#ifndef CVIGILSYSTEMD_SHIM_H
#define CVIGILSYSTEMD_SHIM_H

#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <sys/uio.h>

#endif
