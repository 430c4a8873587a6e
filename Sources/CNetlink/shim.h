#ifndef SYNCD_CNETLINK_SHIM_H
#define SYNCD_CNETLINK_SHIM_H

#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <netlink/msg.h>
#include <netlink/handlers.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>
#include <netlink/route/nexthop.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <linux/if_addr.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

/* Flag and constant values that Swift cannot import from macros with casts. */
static inline unsigned int syncd_iff_up(void) { return IFF_UP; }
static inline unsigned int syncd_iff_running(void) { return IFF_RUNNING; }
static inline unsigned int syncd_iff_lower_up(void) { return IFF_LOWER_UP; }
static inline unsigned int syncd_iff_dormant(void) { return IFF_DORMANT; }
static inline unsigned int syncd_iff_loopback(void) { return IFF_LOOPBACK; }
static inline int syncd_clone_newnet(void) { return 0x40000000; /* CLONE_NEWNET, hidden without _GNU_SOURCE */ }
static inline int syncd_nl_act_new(void) { return NL_ACT_NEW; }
static inline int syncd_nl_act_del(void) { return NL_ACT_DEL; }
static inline int syncd_nl_act_change(void) { return NL_ACT_CHANGE; }

/* setns(2) and pipe2(2) are only declared under _GNU_SOURCE, which the Glibc module is not built with. */
extern int setns(int fd, int nstype);
extern int pipe2(int pipefd[2], int flags);

static inline int syncd_so_rcvbufforce(void) { return 33; /* SO_RCVBUFFORCE */ }
static inline int syncd_so_rcvbuf(void) { return SO_RCVBUF; }
static inline int syncd_rtnh_f_dead(void) { return RTNH_F_DEAD; }
static inline int syncd_rtnh_f_linkdown(void) { return RTNH_F_LINKDOWN; }

/* nl_socket_add_memberships is variadic; this is the one group form. */
static inline int syncd_nl_socket_add_membership(struct nl_sock *sk, int group) {
    return nl_socket_add_membership(sk, group);
}

#endif
