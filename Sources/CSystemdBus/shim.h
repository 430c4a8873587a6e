#ifndef SYNCD_CSYSTEMDBUS_SHIM_H
#define SYNCD_CSYSTEMDBUS_SHIM_H

#include <systemd/sd-bus.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

/*
 * Helpers for NetworkManagerWatcher. sd-bus's message building and method calls are variadic,
 * which Swift cannot call; these are the few fixed signatures the watcher needs.
 */

/*
 * Sends interface.member to destination at path with zero, one or two string arguments (arg1,
 * then arg2; a NULL argument and every one after it is left out), and reports the reply (or
 * the error, or the timeout) to callback on the thread that runs sd_bus_process.
 *
 * The call never activates destination: asking a disabled NetworkManager what a link costs must
 * not start it. *ret_cookie identifies the call; the reply carries it as its reply cookie, which
 * is how one callback tells its replies apart. Returns a negative errno when the call could not
 * be queued.
 */
static inline int syncd_bus_call_async(
        sd_bus *bus, const char *destination, const char *path, const char *interface,
        const char *member, const char *arg1, const char *arg2, uint64_t timeout_usec,
        sd_bus_message_handler_t callback, void *userdata, uint64_t *ret_cookie) {
    sd_bus_message *m = NULL;
    int r = sd_bus_message_new_method_call(bus, &m, destination, path, interface, member);
    if (r < 0)
        return r;
    r = sd_bus_message_set_auto_start(m, 0);
    if (r >= 0 && arg1 != NULL) {
        r = sd_bus_message_append_basic(m, 's', arg1);
        if (r >= 0 && arg2 != NULL)
            r = sd_bus_message_append_basic(m, 's', arg2);
    }
    if (r >= 0)
        r = sd_bus_call_async(bus, NULL, m, callback, userdata, timeout_usec);
    if (r >= 0)
        r = sd_bus_message_get_cookie(m, ret_cookie);
    sd_bus_message_unref(m);
    return r;
}

/* A non-blocking, close-on-exec eventfd: the bus thread's stop signal. */
static inline int syncd_bus_stop_fd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

#endif
