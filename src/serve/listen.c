/*
 * Listening sockets for the transports: TCP on IPv4, IPv6 or a host name,
 * and Unix domain sockets (mode 0660, a stale socket file replaced, any
 * other file left alone).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "serve/serve.h"

mcp_status mcp_tcp_listen(const char *host, int port, int *fd_out, int *bound_port, bool *ipv6, mcp_err *err)
{
    *fd_out = -1;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host, service, &hints, &res);
    if (gai != 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "--host '%s' is not an address or a name that resolves: %s", host,
                           gai_strerror(gai));
    mcp_status st = MCP_STATUS_IO_ERROR;
    int last = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
            last = errno;
            close(fd);
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int p = port;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
            p = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        *fd_out = fd;
        *bound_port = p;
        *ipv6 = a->ai_family == AF_INET6;
        st = MCP_STATUS_OK;
        break;
    }
    freeaddrinfo(res);
    if (st != MCP_STATUS_OK)
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot listen on %s:%d: %s", host, port,
                           last ? strerror(last) : "no usable address");
    return st;
}

mcp_status mcp_unix_prepare(const char *path, mcp_err *err)
{
    struct sockaddr_un sa;
    if (strlen(path) >= sizeof sa.sun_path)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "socket path '%s' is longer than %zu bytes", path,
                           sizeof sa.sun_path - 1);
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT ? MCP_STATUS_OK : mcp_err_set(err, MCP_STATUS_IO_ERROR, "%s: %s", path, strerror(errno));
    if (!S_ISSOCK(sb.st_mode))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s' exists and is not a socket; not replacing it", path);
    /* A socket file: stale unless a server still answers on it. */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        bool live = connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(probe);
        if (live) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "another server is listening on %s", path);
    }
    if (unlink(path) != 0) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot replace stale socket %s: %s", path, strerror(errno));
    return MCP_STATUS_OK;
}

mcp_status mcp_unix_listen(const char *path, int *fd_out, mcp_err *err)
{
    *fd_out = -1;
    mcp_status st = mcp_unix_prepare(path, err);
    if (st != MCP_STATUS_OK) return st;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "socket: %s", strerror(errno));
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    /* Created 0660 from the start: no moment when others could connect. */
    mode_t old = umask(0117);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        close(fd);
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot listen on %s: %s", path, strerror(e));
    }
    chmod(path, 0660);
    *fd_out = fd;
    return MCP_STATUS_OK;
}
