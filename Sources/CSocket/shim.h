#ifndef SYNCD_CSOCKET_SHIM_H
#define SYNCD_CSOCKET_SHIM_H

#include <sys/socket.h>

// accept4 (glibc ≥ 2.10): Swift's Glibc module imports <sys/socket.h> without _GNU_SOURCE,
// which hides it. Declared here so an accepted socket is close-on-exec from the start: set
// afterwards, a child spawned in between keeps the connection open for its whole life.
extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

// pipe2 (glibc ≥ 2.9), hidden the same way: a pipe for a child process is close-on-exec from
// the start, for the same reason.
extern int pipe2(int fds[2], int flags);

#endif
