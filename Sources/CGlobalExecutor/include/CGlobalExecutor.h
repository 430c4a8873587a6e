#ifndef SYNCD_CGLOBALEXECUTOR_H
#define SYNCD_CGLOBALEXECUTOR_H

#include <stdbool.h>

/// Sends every job bound for Swift's global executor to `target` from now on, through the Swift
/// runtime's hook for that executor. Fails (false) when another hook is in place already: the first
/// one set stays.
bool syncd_install_global_enqueue(void (*_Nonnull target)(void *_Nonnull job));

#endif
