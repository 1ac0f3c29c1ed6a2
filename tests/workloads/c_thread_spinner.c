/* A thread made by a C library, not by Python: no thread state, no Python frame. Loaded with
 * ctypes by c_thread.py. pbp_start_spinner(s) starts a pthread that computes in C for s seconds of
 * its own CPU time (so that it is sampled as often on a loaded machine) and names itself
 * "pbp-cspin" 90% of the way; pbp_join_spinner() waits for it (ctypes releases the GIL).
 *
 * Built on the host, loaded by every interpreter of the test matrix, chroots included: bullseye's
 * glibc (2.31) predates 2.34's move of the pthread functions into libc (and their new symbol
 * versions), so the oldest versions of them are asked for. */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

__asm__(".symver pthread_create,pthread_create@GLIBC_2.2.5");
__asm__(".symver pthread_join,pthread_join@GLIBC_2.2.5");
__asm__(".symver pthread_setname_np,pthread_setname_np@GLIBC_2.12");

static volatile unsigned long sink;
static double seconds;
static pthread_t spinner;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);  /* the calling thread's CPU time */
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void spin_until(double end) {
    while (now() < end)
        for (unsigned long i = 0; i < 100000; i++) sink += i;
}

/* It names itself only near its end (after 90% of its time), as threads that a library renames
 * once they know their job do: most of its samples are taken under its parent's name, and the
 * profiler's periodic re-reading of names (every second) is unlikely to see the new one before
 * the thread ends. */
static void* spin(void* arg) {
    (void)arg;
    const double start = now();
    spin_until(start + 0.9 * seconds);
    pthread_setname_np(pthread_self(), "pbp-cspin");
    spin_until(start + seconds);
    return 0;
}

int pbp_start_spinner(double s) {
    seconds = s;
    return pthread_create(&spinner, 0, spin, 0);
}

int pbp_join_spinner(void) { return pthread_join(spinner, 0); }
