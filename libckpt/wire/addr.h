/*
 * addr.h — daemon addresses as written everywhere (flags, environment,
 * config files, protocol fields): "unix:/path/to/socket" or "host:port",
 * with "[v6]:port" for IPv6 literals.
 */
#ifndef CKPTD_SERVER_ADDR_H
#define CKPTD_SERVER_ADDR_H

#include <stddef.h>
#include <sys/un.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CKPTD_ADDR_UNIX = 1, CKPTD_ADDR_TCP = 2 };

typedef struct ckptd_addr {
	int kind;                          /* CKPTD_ADDR_* */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* UNIX */
	char host[256];                    /* TCP: without the brackets */
	char port[8];                      /* TCP: 1..65535, digits */
} ckptd_addr;

/* Parses s. allow: a mask of the kinds accepted. A bare absolute path is
 * read as a Unix socket when UNIX is allowed.
 * Returns 0, or -EINVAL with a reason (static string) in *why. */
int ckptd_addr_parse(const char *s, int allow, ckptd_addr *out, const char **why);

/* Opens a stream socket connected to a, non-blocking and close-on-exec,
 * waiting at most timeout_ms for the connection (-1: no limit).
 * Returns the fd, or a negative errno (-ETIMEDOUT, -ECONNREFUSED, ...). */
int ckptd_addr_connect(const ckptd_addr *a, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif
