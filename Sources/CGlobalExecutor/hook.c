#include "CGlobalExecutor.h"

#include <stddef.h>

// The Swift runtime's hook for its global executor (swift/Runtime/ConcurrencyHooks.def): while
// set, every job bound for the global executor goes to it, with the runtime's own enqueue as the
// second argument. SwiftNIO finds it with dlsym, which a binary with the Swift runtime linked in
// (--static-swift-stdlib) keeps out of its dynamic symbol table; this reference links to it in
// either build.
typedef void (*syncd_enqueue_original)(void *job) __attribute__((swiftcall));
typedef void (*syncd_enqueue_hook)(void *job, syncd_enqueue_original original) __attribute__((swiftcall));
extern syncd_enqueue_hook swift_task_enqueueGlobal_hook;

/// Where the hook sends each job: claimed by the first install, before the hook is set, and never
/// changed after.
static void (*target_of_hook)(void *job);

__attribute__((swiftcall)) static void enqueue(void *job, syncd_enqueue_original original) {
    (void)original;
    __atomic_load_n(&target_of_hook, __ATOMIC_ACQUIRE)(job);
}

bool syncd_install_global_enqueue(void (*target)(void *job)) {
    void (*unclaimed)(void *job) = NULL;
    if (!__atomic_compare_exchange_n(&target_of_hook, &unclaimed, target, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return false;
    syncd_enqueue_hook unset = NULL;
    return __atomic_compare_exchange_n(&swift_task_enqueueGlobal_hook, &unset, enqueue, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
