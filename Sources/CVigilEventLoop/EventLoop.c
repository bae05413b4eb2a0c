// Vigil's single-threaded executor. See include/CVigilEventLoop.h.
//
// Swift's concurrency runtime lets a process replace where jobs go through exported hook
// variables. Of the four, only swift_task_enqueueGlobal_hook is live in Swift 6.3 (the one
// SwiftNIO installs too): the runtime sends `Task.sleep` to Dispatch's timers and main-actor jobs
// to Dispatch's main queue without calling the delay, deadline or main-executor hooks (measured:
// the task-sleep scenario of Tests/VigilEventLoopTests), so the loop installs only that one.
// Global jobs wait on one queue that `cvigil_loop_run` drains on its thread; Dispatch's main queue
// is drained from the loop through its run-loop handle (as CoreFoundation's run loop does), so
// main-actor jobs run on the loop thread too; timers (EventLoopExecutor.sleep) wait in a binary
// heap under one timerfd, which is also how other threads wake the loop; signals arrive through
// one signalfd. The hook uses Swift's calling
// convention, which clang spells `swiftcall`.
#define _GNU_SOURCE
#include "CVigilEventLoop.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define SWIFTCALL __attribute__((swiftcall))

typedef struct Job Job;
typedef struct {
    void *identity;
    uintptr_t implementation;
} SerialExecutorRef;

typedef SWIFTCALL void (*EnqueueOriginal)(Job *);
typedef SWIFTCALL void (*EnqueueHook)(Job *, EnqueueOriginal);

extern EnqueueHook swift_task_enqueueGlobal_hook;
extern SWIFTCALL void swift_job_run(Job *job, SerialExecutorRef executor);

// libdispatch's run-loop integration for its main queue (what CoreFoundation's run loop uses on
// Linux): an eventfd that becomes readable when the main queue has work, and the call that drains
// it on the main thread. Weak: a process without libdispatch has no main queue to drain.
extern int _dispatch_get_main_queue_handle_4CF(void) __attribute__((weak));
extern void _dispatch_main_queue_callback_4CF(void *message) __attribute__((weak));

typedef struct {
    uint64_t deadline;  // CLOCK_MONOTONIC, ns
    uint64_t sequence;  // FIFO among equal deadlines; the timer's id
    cvigil_timer_callback callback;
    void *context;
} Timer;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Job **ready;
static size_t ready_count, ready_capacity;
static Timer *timers;
static size_t timer_count, timer_capacity;
static uint64_t timer_sequence;
static uint64_t armed_deadline;  // what the timerfd is set to; 0 = disarmed
static bool installing, installed, running, stopping;
static pthread_t loop_thread;
static int epoll_fd = -1, timer_fd = -1, signal_fd = -1, main_queue_fd = -1;
static sigset_t watched;   // signals with a callback
static sigset_t drained;   // real-time signals blocked at the loop's start: taken, and discarded if unowned
// Descriptors watched for the daemon (cvigil_loop_watch_descriptor): a memory-pressure file, say.
#define MAXIMUM_DESCRIPTOR_WATCHES 64
typedef struct {
    int descriptor;  // -1: free slot
    cvigil_descriptor_callback callback;
    void *context;
} DescriptorWatch;
static DescriptorWatch descriptor_watches[MAXIMUM_DESCRIPTOR_WATCHES];
static size_t descriptor_watch_count;
static cvigil_signal_callback callbacks[_NSIG];
static void *contexts[_NSIG];
static cvigil_signal_callback unowned_callback;
static void *unowned_context;
static uint64_t discarded;
static const char *failed_descriptor;

// CLOCK_MONOTONIC in ns, the timerfd's clock (Swift code reads it through MonotonicClock).
static uint64_t monotonic_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void grow(void **array, size_t *capacity, size_t element) {
    size_t next = *capacity ? *capacity * 2 : 64;
    void *grown = realloc(*array, next * element);
    if (!grown) abort();
    *array = grown;
    *capacity = next;
}

static bool on_loop_thread(void) { return running && pthread_equal(pthread_self(), loop_thread); }

// Wakes the loop from another thread by making its timerfd expire now: the timerfd is both the
// sleep timer and the doorbell, one descriptor instead of two (issue 21: every descriptor counts
// under a small LimitNOFILE=). The loop arms the timerfd for its next deadline with the lock held,
// after it found the ready queue empty; a job pushed after that comes with a wake that overrides
// that arming, so no wake-up is lost; one that comes late costs one spurious turn of the loop.
static void wake(void) {
    if (timer_fd < 0 || on_loop_thread()) return;
    struct itimerspec now = {.it_value = {.tv_sec = 0, .tv_nsec = 1}};
    timerfd_settime(timer_fd, 0, &now, NULL);
}

static void push_ready(Job *job) {
    pthread_mutex_lock(&lock);
    if (ready_count == ready_capacity) grow((void **)&ready, &ready_capacity, sizeof(Job *));
    ready[ready_count++] = job;
    pthread_mutex_unlock(&lock);
    wake();
}

static bool earlier(const Timer *a, const Timer *b) {
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->sequence < b->sequence);
}

// The heap helpers are called with the lock held.
static void sift_up(size_t index, Timer timer) {
    while (index > 0 && earlier(&timer, &timers[(index - 1) / 2])) {
        timers[index] = timers[(index - 1) / 2];
        index = (index - 1) / 2;
    }
    timers[index] = timer;
}

static void sift_down(size_t index, Timer timer) {
    for (;;) {
        size_t child = index * 2 + 1;
        if (child >= timer_count) break;
        if (child + 1 < timer_count && earlier(&timers[child + 1], &timers[child])) child++;
        if (!earlier(&timers[child], &timer)) break;
        timers[index] = timers[child];
        index = child;
    }
    timers[index] = timer;
}

static Timer remove_timer(size_t index) {
    Timer removed = timers[index];
    Timer last = timers[--timer_count];
    if (index < timer_count) {
        if (index > 0 && earlier(&last, &timers[(index - 1) / 2])) sift_up(index, last);
        else sift_down(index, last);
    }
    return removed;
}

uint64_t cvigil_loop_add_timer(uint64_t deadline, cvigil_timer_callback callback, void *context) {
    pthread_mutex_lock(&lock);
    if (timer_count == timer_capacity) grow((void **)&timers, &timer_capacity, sizeof(Timer));
    uint64_t sequence = ++timer_sequence;
    Timer timer = {deadline, sequence, callback, context};
    sift_up(timer_count++, timer);
    bool rearm = armed_deadline == 0 || deadline < armed_deadline;
    pthread_mutex_unlock(&lock);
    if (rearm) wake();
    return sequence;
}

bool cvigil_loop_cancel_timer(uint64_t id) {
    pthread_mutex_lock(&lock);
    bool found = false;
    for (size_t index = 0; index < timer_count; index++) {
        if (timers[index].sequence == id) {
            remove_timer(index);
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    // The loop re-arms (or disarms) the timerfd for the new earliest deadline before it sleeps.
    if (found) wake();
    return found;
}

size_t cvigil_loop_pending_timers(void) {
    pthread_mutex_lock(&lock);
    size_t count = timer_count;
    pthread_mutex_unlock(&lock);
    return count;
}

static SWIFTCALL void enqueue_global(Job *job, EnqueueOriginal original) {
    (void)original;
    push_ready(job);
}

// Installs one hook with a compare-and-swap from NULL, as SwiftNIO installs its own: another
// library that does the same cannot be overwritten unnoticed. (One that stores without an atomic
// operation can still race; nothing can prevent that.)
static bool claim(void **hook, void *ours) {
    void *expected = NULL;
    return __atomic_compare_exchange_n(hook, &expected, ours, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

bool cvigil_loop_install(void) {
    bool expected = false;
    if (!__atomic_compare_exchange_n(&installing, &expected, true, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return __atomic_load_n(&installed, __ATOMIC_SEQ_CST);
    sigemptyset(&watched);
    if (!claim((void **)&swift_task_enqueueGlobal_hook, (void *)enqueue_global)) {
        // Another executor owns the hook: leave the runtime as it was.
        __atomic_store_n(&installing, false, __ATOMIC_SEQ_CST);
        return false;
    }
    __atomic_store_n(&installed, true, __ATOMIC_SEQ_CST);
    return true;
}

bool cvigil_loop_installed(void) { return __atomic_load_n(&installed, __ATOMIC_SEQ_CST); }

void cvigil_loop_stop(void) {
    pthread_mutex_lock(&lock);
    stopping = true;
    pthread_mutex_unlock(&lock);
    wake();
}

static int add(int fd) {
    struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
    return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event);
}

// The signalfd's mask: the signals someone watches, and the real-time signals it drains.
static sigset_t signalfd_mask(void) {
    sigset_t mask;
    sigorset(&mask, &watched, &drained);
    return mask;
}

// Records which descriptor could not be had; returns its errno.
static int failed(const char *what) {
    int code = errno;
    failed_descriptor = what;
    return code ? code : EINVAL;
}

void cvigil_loop_open_standard_descriptors(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        // The lowest free number is `fd`: the ones below it are open by now.
        int null = open("/dev/null", O_RDWR);
        if (null >= 0 && null != fd) {
            dup2(null, fd);
            close(null);
        }
    }
}

// Every descriptor the loop needs, at once, before any job runs: a process short of descriptors
// (LimitNOFILE=) fails here with the name of the one it could not get, not halfway through.
static int open_descriptors(void) {
    if (epoll_fd >= 0) return 0;
    // Started with stdin, stdout or stderr closed, the loop's descriptors would take 0-2 and log
    // lines written to "stderr" would go into them (VigilEarlySignals does this even earlier).
    cvigil_loop_open_standard_descriptors();
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    if (epoll < 0) return failed("epoll (epoll_create1)");
    epoll_fd = epoll;
    timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (timer_fd < 0) return failed("timerfd");
    // One signalfd for every signal: the watched ones join its mask later (signalfd on the same
    // descriptor needs no new one). Real-time signals that are blocked here (VigilEarlySignals
    // blocks them all) are drained from the start: each one queued is charged to a user's
    // RLIMIT_SIGPENDING until someone takes it.
    sigset_t blocked;
    sigemptyset(&drained);
    if (pthread_sigmask(SIG_BLOCK, NULL, &blocked) == 0) {
        for (int signal = SIGRTMIN; signal <= SIGRTMAX; signal++) {
            if (sigismember(&blocked, signal) == 1) sigaddset(&drained, signal);
        }
    }
    pthread_mutex_lock(&lock);
    sigset_t mask = signalfd_mask();
    signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    pthread_mutex_unlock(&lock);
    if (signal_fd < 0) return failed("signalfd");
    if (add(timer_fd) < 0 || add(signal_fd) < 0) return failed("epoll registration (epoll_ctl)");
    // Dispatch drains its main queue only on the main thread.
    bool main_thread = getpid() == (pid_t)syscall(SYS_gettid);
    if (main_thread && _dispatch_get_main_queue_handle_4CF && _dispatch_main_queue_callback_4CF) {
        // Dispatch makes this eventfd on first use and traps (SIGILL, no message) when it cannot:
        // make sure a descriptor is free first. Nothing else runs yet, so it stays free.
        int probe = eventfd(0, EFD_CLOEXEC);
        if (probe < 0) return failed("main-queue eventfd (Dispatch's)");
        close(probe);
        main_queue_fd = _dispatch_get_main_queue_handle_4CF();
        if (main_queue_fd >= 0 && add(main_queue_fd) < 0) return failed("epoll registration (epoll_ctl)");
    }
    return 0;
}

const char *cvigil_loop_failed_descriptor(void) { return failed_descriptor; }

uint64_t cvigil_loop_discarded_signals(void) { return __atomic_load_n(&discarded, __ATOMIC_RELAXED); }

void cvigil_loop_set_unowned_signal_callback(cvigil_signal_callback callback, void *context) {
    pthread_mutex_lock(&lock);
    unowned_callback = callback;
    unowned_context = context;
    pthread_mutex_unlock(&lock);
}

int cvigil_loop_watch_signal(int signal, cvigil_signal_callback callback, void *context) {
    int failure = open_descriptors();
    if (failure) return failure;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signal);
    if (pthread_sigmask(SIG_BLOCK, &one, NULL) != 0) return errno;
    pthread_mutex_lock(&lock);
    callbacks[signal] = callback;
    contexts[signal] = context;
    sigaddset(&watched, signal);
    sigset_t mask = signalfd_mask();
    // The same descriptor with a new mask: this never needs a descriptor of its own.
    int result = signalfd(signal_fd, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    pthread_mutex_unlock(&lock);
    return result < 0 ? errno : 0;
}

void cvigil_loop_unwatch_signal(int signal) {
    // The signal stays blocked: unblocking a pending SIGTERM here would kill the process with
    // the default action while it is already stopping. A drained real-time signal stays in the
    // signalfd's mask and is discarded from now on.
    pthread_mutex_lock(&lock);
    sigdelset(&watched, signal);
    callbacks[signal] = NULL;
    sigset_t mask = signalfd_mask();
    if (signal_fd >= 0) signalfd(signal_fd, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    pthread_mutex_unlock(&lock);
}

void cvigil_loop_unwatch_signals(const int *signals, size_t count) {
    pthread_mutex_lock(&lock);
    for (size_t index = 0; index < count; index++) {
        if (signals[index] <= 0 || signals[index] >= _NSIG) continue;
        sigdelset(&watched, signals[index]);
        callbacks[signals[index]] = NULL;
    }
    sigset_t mask = signalfd_mask();
    if (signal_fd >= 0) signalfd(signal_fd, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    pthread_mutex_unlock(&lock);
}

int cvigil_loop_watch_descriptor(int descriptor, uint32_t events, cvigil_descriptor_callback callback, void *context) {
    int failed = open_descriptors();
    if (failed) return failed;
    pthread_mutex_lock(&lock);
    size_t slot = descriptor_watch_count;
    for (size_t index = 0; index < descriptor_watch_count; index++) {
        if (descriptor_watches[index].descriptor == descriptor) {
            pthread_mutex_unlock(&lock);
            return EEXIST;
        }
        if (descriptor_watches[index].descriptor < 0 && slot == descriptor_watch_count) slot = index;
    }
    if (slot == MAXIMUM_DESCRIPTOR_WATCHES) {
        pthread_mutex_unlock(&lock);
        return ENOSPC;
    }
    descriptor_watches[slot] = (DescriptorWatch){descriptor, callback, context};
    if (slot == descriptor_watch_count) descriptor_watch_count++;
    struct epoll_event event = {.events = events, .data.fd = descriptor};
    int result = epoll_ctl(epoll_fd, EPOLL_CTL_ADD, descriptor, &event);
    int error = result < 0 ? errno : 0;
    if (error) descriptor_watches[slot].descriptor = -1;
    pthread_mutex_unlock(&lock);
    return error;
}

void cvigil_loop_unwatch_descriptor(int descriptor) {
    pthread_mutex_lock(&lock);
    for (size_t index = 0; index < descriptor_watch_count; index++) {
        if (descriptor_watches[index].descriptor == descriptor) {
            descriptor_watches[index].descriptor = -1;
            epoll_ctl(epoll_fd, EPOLL_CTL_DEL, descriptor, NULL);
        }
    }
    pthread_mutex_unlock(&lock);
}

// Calls the callback of a watched descriptor epoll reported (none when it was unwatched since).
static void deliver_descriptor(int descriptor, uint32_t revents) {
    pthread_mutex_lock(&lock);
    cvigil_descriptor_callback callback = NULL;
    void *context = NULL;
    for (size_t index = 0; index < descriptor_watch_count; index++) {
        if (descriptor_watches[index].descriptor == descriptor) {
            callback = descriptor_watches[index].callback;
            context = descriptor_watches[index].context;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (callback) callback(descriptor, revents, context);
}

static void arm(uint64_t deadline) {
    if (deadline == armed_deadline) return;
    struct itimerspec when = {0};
    if (deadline) {
        when.it_value.tv_sec = (time_t)(deadline / 1000000000u);
        when.it_value.tv_nsec = (long)(deadline % 1000000000u);
    }
    timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &when, NULL);
    armed_deadline = deadline;
}

static void deliver_signals(void) {
    // Up to 8 pending signals per read; a read that fills fewer slots took all there were (the
    // descriptor is level-triggered: one that comes after is reported by the next epoll_wait),
    // so a lone SIGHUP costs one read, not a second one that fails with EAGAIN.
    struct signalfd_siginfo infos[8];
    for (;;) {
        ssize_t got = read(signal_fd, infos, sizeof infos);
        if (got < (ssize_t)sizeof infos[0]) return;
        size_t count = (size_t)got / sizeof infos[0];
        for (size_t index = 0; index < count; index++) {
            int signal = (int)infos[index].ssi_signo;
            pthread_mutex_lock(&lock);
            cvigil_signal_callback callback = signal < _NSIG ? callbacks[signal] : NULL;
            void *context = signal < _NSIG ? contexts[signal] : NULL;
            if (!callback) {
                // Nobody owns it (a drained real-time signal): taken off the queue, counted.
                __atomic_add_fetch(&discarded, 1, __ATOMIC_RELAXED);
                callback = unowned_callback;
                context = unowned_context;
            }
            pthread_mutex_unlock(&lock);
            if (callback) callback(signal, context);
        }
        if (count < sizeof infos / sizeof infos[0]) return;
    }
}

// Handles what epoll reports within `timeout` milliseconds (-1: until something comes).
static void poll_events(int timeout) {
    struct epoll_event events[4];
    int ready_events = epoll_wait(epoll_fd, events, 4, timeout);
    for (int index = 0; index < ready_events; index++) {
        int fd = events[index].data.fd;
        uint64_t value;
        if (fd == timer_fd) {
            // Its deadline came, or another thread rang (see wake): either way disarmed now.
            ssize_t ignored = read(fd, &value, sizeof value);
            (void)ignored;
            armed_deadline = 0;
        } else if (fd == signal_fd) {
            deliver_signals();
        } else if (fd == main_queue_fd) {
            // Reset the eventfd first: work enqueued while draining makes it readable again.
            ssize_t ignored = read(fd, &value, sizeof value);
            (void)ignored;
            _dispatch_main_queue_callback_4CF(NULL);
        } else {
            deliver_descriptor(fd, events[index].events);
        }
    }
}

// How long the loop may run jobs back to back before it looks at signals and descriptors
// without waiting: jobs that keep making jobs (a task that never suspends on I/O, a timer due
// again at once) must not starve a SIGTERM.
#define POLL_WHILE_BUSY_NSEC 1000000ULL

int cvigil_loop_run(void) {
    int failure = open_descriptors();
    if (failure) return failure;
    loop_thread = pthread_self();
    running = true;
    SerialExecutorRef generic = {0, 0};
    Job **batch = NULL;
    size_t batch_capacity = 0;
    // When the loop last asked epoll (see POLL_WHILE_BUSY_NSEC).
    uint64_t polled = monotonic_now();
    for (;;) {
        // Fire due callback timers (outside the lock: they enqueue jobs).
        pthread_mutex_lock(&lock);
        uint64_t now = timer_count ? monotonic_now() : 0;
        while (timer_count && timers[0].deadline <= now) {
            Timer due = remove_timer(0);
            pthread_mutex_unlock(&lock);
            due.callback(due.context);
            pthread_mutex_lock(&lock);
        }
        // Take the whole ready queue and run it.
        size_t count = ready_count;
        if (count) {
            Job **swap = batch;
            size_t swap_capacity = batch_capacity;
            batch = ready;
            batch_capacity = ready_capacity;
            ready = swap;
            ready_capacity = swap_capacity;
            ready_count = 0;
        }
        bool stop = stopping && count == 0;
        // About to sleep: arm the timerfd for the earliest deadline with the lock held, so that
        // a job, timer or stop that comes after this check brings a wake that overrides it.
        if (!count && !stop) arm(timer_count ? timers[0].deadline : 0);
        pthread_mutex_unlock(&lock);
        if (stop) break;
        if (count) {
            for (size_t index = 0; index < count; index++) {
                swift_job_run(batch[index], generic);
            }
            uint64_t after = monotonic_now();
            if (after - polled >= POLL_WHILE_BUSY_NSEC) {
                poll_events(0);
                polled = after;
            }
            continue;
        }
        poll_events(-1);
        polled = monotonic_now();
    }
    running = false;
    free(batch);
    return 0;
}

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int cvigil_pidfd_open(int pid) {
    long descriptor = syscall(SYS_pidfd_open, pid, 0);  // pidfds are always close-on-exec
    return descriptor < 0 ? -errno : (int)descriptor;
}

// The local file systems a read cannot wait on a network or a user-space server for (magic
// numbers from linux/magic.h, which this file does not include so as to build on any headers).
bool cvigil_is_local_file_system(long type) {
    switch ((unsigned long)type & 0xffffffffUL) {
    case 0xEF53UL:      // ext2, ext3, ext4
    case 0x58465342UL:  // XFS
    case 0x9123683EUL:  // Btrfs
    case 0xF2F52010UL:  // F2FS
    case 0x01021994UL:  // tmpfs
    case 0x858458F6UL:  // ramfs
        return true;
    default:
        return false;
    }
}

int cvigil_path_file_system_type(const char *path, uint32_t *type) {
    struct statfs info;
    int result;
    do {
        result = statfs(path, &info);
    } while (result != 0 && errno == EINTR);
    if (result != 0) return -errno;
    *type = (uint32_t)((unsigned long)info.f_type & 0xffffffffUL);
    return 0;
}

int cvigil_open_local(const char *path, int flags) {
#ifdef SYS_openat2
    // struct open_how from linux/openat2.h, spelled out for the same reason.
    struct {
        uint64_t flags;
        uint64_t mode;
        uint64_t resolve;
    } how = {.flags = (uint64_t)(unsigned)flags, .mode = 0, .resolve = 0x01 /* RESOLVE_NO_XDEV */};
    long descriptor;
    do {
        descriptor = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    } while (descriptor < 0 && errno == EINTR);
    if (descriptor < 0) return -errno;
    // RESOLVE_NO_XDEV kept the path on one mount, the root's or the working directory's: its file
    // system is the file's, asked on every call. Not cached: chroot(2), setns(2) and pivot_root(2)
    // (systemd's switch-root) move a process's root, and a cached "local" then let a read on a
    // FUSE mount that never answers block the event loop.
    struct statfs info;
    bool local = fstatfs((int)descriptor, &info) == 0 && cvigil_is_local_file_system((long)info.f_type);
    if (!local) {
        close((int)descriptor);
        return -EXDEV;
    }
    return (int)descriptor;
#else
    (void)path;
    (void)flags;
    return -ENOSYS;
#endif
}

int cvigil_allowed_processors(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    return CPU_COUNT(&set);
}

int cvigil_current_processor(void) { return sched_getcpu(); }

int cvigil_semaphore_wait_until(void *semaphore, uint64_t deadline) {
    struct timespec due = {.tv_sec = (time_t)(deadline / 1000000000u), .tv_nsec = (long)(deadline % 1000000000u)};
    while (sem_clockwait((sem_t *)semaphore, CLOCK_MONOTONIC, &due) != 0) {
        if (errno != EINTR) return errno;
    }
    return 0;
}

void cvigil_processor_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
