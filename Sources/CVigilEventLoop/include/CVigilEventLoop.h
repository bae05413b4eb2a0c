#ifndef CVIGIL_EVENT_LOOP_H
#define CVIGIL_EVENT_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Vigil's single-threaded executor for daemons: Swift concurrency's global executor replaced by
/// one epoll loop on the calling thread, which also drains Dispatch's main queue (main-actor
/// jobs), with a timerfd for sleeps and a signalfd for signals. No Dispatch worker threads, so
/// no wake-ups while idle.

/// Installs the runtime hook (`swift_task_enqueueGlobal_hook`, with a compare-and-swap from
/// NULL); jobs enqueued from now on wait for `cvigil_loop_run`. Returns false, and changes
/// nothing, when another executor's hook is already installed. Call once, from the main thread
/// (the one that will call `cvigil_loop_run`), before any task is created.
bool cvigil_loop_install(void);

/// Runs jobs, timers and signal callbacks on this thread until `cvigil_loop_stop`.
/// Returns 0, or an errno when the loop's descriptors could not be set up (before any job ran;
/// `cvigil_loop_failed_descriptor` names the one). The loop holds four descriptors: epoll, a
/// timerfd (its sleeps, and how other threads wake it), one signalfd for every signal, and
/// Dispatch's main-queue eventfd.
int cvigil_loop_run(void);

/// Opens /dev/null on each of descriptors 0, 1 and 2 that is closed, so that no descriptor the
/// process opens later becomes its stdin, stdout or stderr (log lines written to stderr would
/// go into it). `cvigil_loop_run` calls it first thing; CVigilEarlySignals before main.
void cvigil_loop_open_standard_descriptors(void);

/// The descriptor `cvigil_loop_run` could not get ("signalfd", say), or NULL.
const char *cvigil_loop_failed_descriptor(void);

/// Makes `cvigil_loop_run` return once the job that called this finishes. Any thread.
void cvigil_loop_stop(void);

/// True when the hook is installed (the loop owns the process's executor).
bool cvigil_loop_installed(void);

/// A signal callback: runs on the loop thread for each delivery.
typedef void (*cvigil_signal_callback)(int signal, void *context);

/// Delivers `signal` through the loop's signalfd: blocks it for the calling thread (call from
/// the loop thread, before other threads start, so that every thread inherits the mask) and
/// calls `callback` on the loop thread for each delivery. Returns 0 or an errno.
int cvigil_loop_watch_signal(int signal, cvigil_signal_callback callback, void *context);

/// Stops watching `signal`. It stays blocked (unblocking a pending SIGTERM would kill a process
/// that is already stopping): a standard signal sent afterwards stays pending (at most one per
/// signal), a real-time one the loop drains is discarded.
void cvigil_loop_unwatch_signal(int signal);

/// `cvigil_loop_unwatch_signal` for `count` signals at once: one `signalfd` call, not one each.
void cvigil_loop_unwatch_signals(const int *signals, size_t count);

/// Called on the loop thread for each signal the loop took but nobody watches: the real-time
/// signals that were blocked when the loop started (all of them under VigilEarlySignals) go
/// through the loop's signalfd and are discarded, because each one left queued is charged to
/// a user's RLIMIT_SIGPENDING for as long as the process lives. NULL: discard silently.
void cvigil_loop_set_unowned_signal_callback(cvigil_signal_callback callback, void *context);

/// How many unowned signals the loop has taken and discarded. Any thread.
uint64_t cvigil_loop_discarded_signals(void);

/// A timer callback: runs on the loop thread at its deadline unless cancelled first.
typedef void (*cvigil_timer_callback)(void *context);

/// Calls `callback` on the loop thread at `deadline` (CLOCK_MONOTONIC, ns). Any thread.
/// Returns the timer's id for `cvigil_loop_cancel_timer`.
uint64_t cvigil_loop_add_timer(uint64_t deadline, cvigil_timer_callback callback, void *context);

/// Removes a timer that has not fired: true when it was removed (its callback will not run),
/// false when it already fired or is firing. A removed timer leaves no wake-up behind.
bool cvigil_loop_cancel_timer(uint64_t id);

/// How many timers wait (a callback timer or a delayed job): 0 once every sleep has ended or
/// been cancelled. Any thread.
size_t cvigil_loop_pending_timers(void);

/// A descriptor callback: runs on the loop thread each time epoll reports the descriptor with
/// the events asked for (`revents` holds what it reported, EPOLLERR and EPOLLHUP included).
typedef void (*cvigil_descriptor_callback)(int descriptor, uint32_t revents, void *context);

/// Watches `descriptor` (level-triggered) for `events` (EPOLLIN, EPOLLPRI, …) on the loop's
/// epoll and calls `callback` on the loop thread for each report. One watch per descriptor; the
/// caller keeps the descriptor open until `cvigil_loop_unwatch_descriptor`. Any thread. Returns 0
/// or an errno (EEXIST when it is watched already, ENOSPC past 64 watches).
int cvigil_loop_watch_descriptor(int descriptor, uint32_t events, cvigil_descriptor_callback callback, void *context);

/// Stops watching `descriptor`; its callback is not called once this returns on the loop thread
/// (from another thread, one call already under way may still finish). Any thread.
void cvigil_loop_unwatch_descriptor(int descriptor);

/// `pidfd_open(2)` (Linux 5.3): a close-on-exec descriptor that becomes readable when the
/// process `pid` ends. Returns the descriptor, or -errno (ENOSYS on an older kernel, ESRCH when
/// there is no such process). Glibc before 2.36 has no wrapper, and Swift cannot call syscall().
int cvigil_pidfd_open(int pid);

/// Opens `path` with `flags` only when no call on the way can wait on a network or a user-space
/// server: `openat2(2)` (Linux 5.6) with RESOLVE_NO_XDEV, so resolution never crosses into
/// another mount (an NFS or FUSE mount, an automount point: EXDEV, before that file system is
/// asked anything), and then `fstatfs` on the result must name a local file system (ext2/3/4,
/// XFS, Btrfs, F2FS, tmpfs, ramfs). Returns the descriptor, or -errno: EXDEV when the path is on
/// another mount than its start (the root for an absolute path) or on a file system not in that
/// list, ENOSYS before Linux 5.6, or what the open failed with. On any failure the caller does
/// the open the slow way (on a helper thread with a deadline), which reports errors as usual.
int cvigil_open_local(const char *path, int flags);

/// Whether `type` (a `statfs` `f_type`) is one of the local file systems `cvigil_open_local`
/// trusts not to wait on a network or a user-space server: ext2/3/4, XFS, Btrfs, F2FS, tmpfs,
/// ramfs. The one list, also for the runtime directory a daemon may use.
bool cvigil_is_local_file_system(long type);

/// `statfs(2)` of `path` (links followed), `EINTR` retried: stores its `f_type` in `type` and
/// returns 0, or returns -errno. It asks the file system (a FUSE server is sent `statfs`), so it
/// may block as long as that does: not for the event loop's thread.
int cvigil_path_file_system_type(const char *path, uint32_t *type);

/// How many processors this process may run on (its affinity mask); 1 when that cannot be read.
int cvigil_allowed_processors(void);

/// The processor the calling thread runs on (`sched_getcpu(3)`), or -1.
int cvigil_current_processor(void);

/// Waits on a `sem_t` until it is posted or `CLOCK_MONOTONIC` reaches `deadline` (ns), whatever
/// the wall clock does meanwhile (`sem_clockwait`; `sem_timedwait` waits for a wall-clock time,
/// so a clock stepped back would stretch the wait). Returns 0 when posted, else the error
/// (ETIMEDOUT).
int cvigil_semaphore_wait_until(void *semaphore, uint64_t deadline);

/// Tells the processor that the caller spins (x86 `pause`, Arm `yield`): no system call.
void cvigil_processor_pause(void);

#endif
