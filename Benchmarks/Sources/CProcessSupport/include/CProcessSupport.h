// What the process harness needs from the C library that Swift does not import.
#ifndef CPROCESSSUPPORT_H
#define CPROCESSSUPPORT_H

/// pidfd_open(2) for a child: a descriptor that polls readable once it has exited (not reaped);
/// -1 with errno set on failure (a kernel before 5.3: ENOSYS).
int vigil_bench_pidfd_open(int pid);

#endif
