#ifndef SYNCD_CSQLITECONFIG_SHIM_H
#define SYNCD_CSQLITECONFIG_SHIM_H

// sqlite3_config is variadic, which Swift cannot call: one wrapper per option used.
#include <sqlite3.h>

/// Turns off SQLite's process-wide memory statistics, which take a global mutex on every
/// allocation. Only valid before SQLite is initialised (the first open); SQLITE_MISUSE after.
static inline int syncd_sqlite3_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif
