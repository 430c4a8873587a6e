#ifndef SYNCD_CTHREAD_SHIM_H
#define SYNCD_CTHREAD_SHIM_H

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Names the calling thread (15 bytes at most), as ps -L and /proc/PID/task/TID/comm show it.
   prctl(2) is variadic, so out of Swift's reach, and pthread_setname_np needs _GNU_SOURCE. */
static inline int syncd_set_thread_name(const char *name) { return prctl(PR_SET_NAME, name, 0, 0, 0); }

/* The calling thread's kernel id (gettid(2) is only declared under _GNU_SOURCE). */
static inline int syncd_gettid(void) { return (int)syscall(SYS_gettid); }

#endif
