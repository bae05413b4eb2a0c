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
/// Returns 0, or an errno when the loop's descriptors could not be set up.
int cvigil_loop_run(void);

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

/// Stops watching `signal`. It stays blocked: one sent afterwards stays pending, harmless
/// (unblocking a pending SIGTERM would kill a process that is already stopping).
void cvigil_loop_unwatch_signal(int signal);

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

#endif
