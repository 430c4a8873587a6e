#ifndef SYNCD_CSCHEDULING_SHIM_H
#define SYNCD_CSCHEDULING_SHIM_H

// sched_getattr(2) and sched_setattr(2), which glibc did not wrap before 2.41 and Swift cannot
// reach through the variadic syscall(2).
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/// The kernel's struct sched_attr, as of its second size (56 bytes, with the utilisation clamps).
struct syncd_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    /// For SCHED_OTHER and SCHED_BATCH since Linux 6.12: the task's EEVDF slice, in nanoseconds.
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
    uint32_t sched_util_min;
    uint32_t sched_util_max;
};

/// The calling thread's scheduling attributes; 0, or -1 with errno set.
static inline int syncd_sched_getattr(struct syncd_sched_attr *attr) {
    return (int)syscall(SYS_sched_getattr, 0, attr, (unsigned int)sizeof *attr, 0);
}

/// Sets the calling thread's scheduling attributes; 0, or -1 with errno set.
static inline int syncd_sched_setattr(struct syncd_sched_attr *attr) {
    attr->size = (uint32_t)sizeof *attr;
    return (int)syscall(SYS_sched_setattr, 0, attr, 0);
}

#endif
