// libsystemd's C API, for the benchmarks only: they measure raw `sd_notify` and
// `sd_journal_sendv` as the floor Vigil's own protocol code is compared with. Vigil itself does
// not link libsystemd (it speaks the notify and journal protocols itself). `sd_journal_send` and
// `sd_notifyf` are variadic and do not import into Swift, hence the non-variadic calls.
#ifndef CVIGILSYSTEMD_SHIM_H
#define CVIGILSYSTEMD_SHIM_H

#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <sys/uio.h>

#endif
