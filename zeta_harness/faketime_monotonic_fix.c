/*
 * Preloaded before Debian's libfaketime (0.9.10) on a host with a skewed wall clock
 * (zeta_harness/hosts.py, NamespaceHost(wall_clock_skew=...)): with FAKETIME_DONT_FAKE_MONOTONIC=1
 * libfaketime leaves clock_gettime(CLOCK_MONOTONIC / CLOCK_BOOTTIME) true, but still shifts the
 * absolute deadlines given to clock_nanosleep and timer_settime on those clocks by the fake offset:
 * Python 3.11's time.sleep (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)) fails with EINVAL
 * (libfaketime issue 426), and a POSIX timer on CLOCK_BOOTTIME armed at an absolute deadline
 * fires minutes early or late. A host whose wall clock is off by minutes has neither fault: its
 * monotonic and boot clocks run true. So this library sends calls on those clocks straight to the
 * C library and everything else on to libfaketime.
 *
 * Built by the harness: gcc -shared -fPIC -O2 -o <lib>.so faketime_monotonic_fix.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

static void *libc_handle(void) {
    static void *handle;
    if (!handle)
        handle = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    return handle;
}

static void *symbol(int own_clock, const char *name) {
    void *found = own_clock ? dlsym(libc_handle(), name) : dlsym(RTLD_NEXT, name);
    return found ? found : dlsym(RTLD_NEXT, name);
}

static int true_clock(clockid_t clock) {
    return clock == CLOCK_MONOTONIC || clock == CLOCK_MONOTONIC_RAW || clock == CLOCK_MONOTONIC_COARSE ||
           clock == CLOCK_BOOTTIME || clock == CLOCK_BOOTTIME_ALARM;
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *request, struct timespec *remain) {
    int (*call)(clockid_t, int, const struct timespec *, struct timespec *) =
        symbol(true_clock(clock), "clock_nanosleep");
    return call(clock, flags, request, remain);
}

/* Which timers run on a true clock: timer_settime is not told the timer's clock. */
#define TIMERS 256
static timer_t true_timers[TIMERS];
static int true_timer_count;
static pthread_mutex_t timers_lock = PTHREAD_MUTEX_INITIALIZER;

static int on_true_clock(timer_t timer) {
    int found = 0;
    pthread_mutex_lock(&timers_lock);
    for (int i = 0; i < true_timer_count && !found; i++)
        found = true_timers[i] == timer;
    pthread_mutex_unlock(&timers_lock);
    return found;
}

int timer_create(clockid_t clock, struct sigevent *event, timer_t *timer) {
    int (*call)(clockid_t, struct sigevent *, timer_t *) = symbol(0, "timer_create");
    int result = call(clock, event, timer);
    if (result == 0 && true_clock(clock)) {
        pthread_mutex_lock(&timers_lock);
        if (true_timer_count < TIMERS)
            true_timers[true_timer_count++] = *timer;
        pthread_mutex_unlock(&timers_lock);
    }
    return result;
}

int timer_delete(timer_t timer) {
    int (*call)(timer_t) = symbol(0, "timer_delete");
    pthread_mutex_lock(&timers_lock);
    for (int i = 0; i < true_timer_count; i++)
        if (true_timers[i] == timer) {
            true_timers[i] = true_timers[--true_timer_count];
            break;
        }
    pthread_mutex_unlock(&timers_lock);
    return call(timer);
}

int timer_settime(timer_t timer, int flags, const struct itimerspec *value, struct itimerspec *old) {
    int (*call)(timer_t, int, const struct itimerspec *, struct itimerspec *) =
        symbol(on_true_clock(timer), "timer_settime");
    return call(timer, flags, value, old);
}

int timer_gettime(timer_t timer, struct itimerspec *value) {
    int (*call)(timer_t, struct itimerspec *) = symbol(on_true_clock(timer), "timer_gettime");
    return call(timer, value);
}

/*
 * Timed waits on a condition variable whose clock is CLOCK_MONOTONIC (the JVM's Thread.sleep,
 * Object.wait and LockSupport.parkNanos): libfaketime 0.9.10 shifts their absolute deadlines by
 * the fake offset too, so a JVM on a host ahead spins (every wait times out at once) and one on a
 * host behind sleeps minutes; Spark's driver then never finishes a job. glibc (2.25 and later)
 * keeps a condition variable's clock in bit 1 of its __wrefs word: those on a true clock go
 * straight to the C library, the others on to libfaketime.
 */
int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *deadline) {
    static int (*to_libc)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    static int (*to_next)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    if (!to_libc)
        to_libc = dlvsym(libc_handle(), "pthread_cond_timedwait", "GLIBC_2.3.2");
    if (!to_next)
        to_next = dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
    int monotonic = (cond->__data.__wrefs & 2) != 0;
    return (monotonic && to_libc ? to_libc : to_next)(cond, mutex, deadline);
}
