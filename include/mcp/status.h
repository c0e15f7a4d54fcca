/* One status enum for all of libmcp, generated from one X-macro. */
#ifndef MCP_STATUS_H
#define MCP_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#define MCP_STATUS_MAP(X)                                                     \
    X(OK, "ok")                                                               \
    X(INVALID_ARGUMENT, "invalid argument")                                   \
    X(INVALID_MODEL, "invalid model")                                         \
    X(UNSUPPORTED, "unsupported")                                             \
    X(NOT_FOUND, "not found")                                                 \
    X(OUT_OF_MEMORY, "out of memory")                                         \
    X(IO_ERROR, "i/o error")                                                  \
    X(RUNTIME_ERROR, "runtime error")                                         \
    X(INTERNAL, "internal error")                                             \
    X(UNAVAILABLE, "unavailable")                                             \
    X(RESOURCE_EXHAUSTED, "resource exhausted")                               \
    X(DEADLINE_EXCEEDED, "deadline exceeded")                                 \
    X(CANCELLED, "cancelled")                                                 \
    X(TOO_LARGE, "too large")                                                 \
    X(PERMISSION_DENIED, "permission denied")                                 \
    X(UNAUTHENTICATED, "unauthenticated")                                     \
    X(FAILED_PRECONDITION, "failed precondition")

typedef enum mcp_status {
#define MCP__STATUS_ENUM(name, text) MCP_STATUS_##name,
    MCP_STATUS_MAP(MCP__STATUS_ENUM)
#undef MCP__STATUS_ENUM
        MCP_STATUS_COUNT
} mcp_status;

/* Short English name of a status; never NULL. */
const char *mcp_status_str(mcp_status status);

#ifdef __cplusplus
}
#endif
#endif
