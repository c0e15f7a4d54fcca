/*
 * A test-only kernel, linked into mcp2026-server-probe and never into the
 * shipped server: op SandboxProbe (domain mcp.test, opset 1) copies its
 * float input to its output after trying one system call the inference
 * sandbox forbids, chosen by the string attribute `action`:
 *
 *   socket  socket(AF_INET, SOCK_STREAM, 0), closed again
 *   exec    execve of a path that does not exist, so it can never replace
 *           the server: unconfined, the kernel answers ENOENT
 *   open    open("/etc/hostname", O_RDONLY), closed again
 *
 * A refusal (EPERM from the filter, EACCES from Landlock) fails the run
 * with a message naming the call; any other answer means the call reached
 * the kernel's own code for it, which is what an unconfined thread sees.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ops/ops.h"

#define PROBE_EXEC_PATH "/nonexistent/mcp-sandbox-probe"

typedef int (*probe_call)(void);

static int call_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) close(fd);
    return fd < 0 ? -1 : 0;
}

static int call_exec(void)
{
    char *const argv[] = {PROBE_EXEC_PATH, NULL};
    char *const envp[] = {NULL};
    return execve(PROBE_EXEC_PATH, argv, envp);
}

static int call_open(void)
{
    int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
    return fd < 0 ? -1 : 0;
}

typedef struct probe_action {
    const char *name; /* the attribute's value */
    const char *call; /* what the error message names */
    probe_call run;
} probe_action;

static const probe_action actions[] = {
    {"socket", "socket", call_socket},
    {"exec", "execve", call_exec},
    {"open", "open", call_open},
};

static const probe_action *find_action(const char *name)
{
    for (size_t i = 0; name && i < sizeof actions / sizeof actions[0]; i++)
        if (strcmp(actions[i].name, name) == 0) return &actions[i];
    return NULL;
}

static bool refused(int e) { return e == EPERM || e == EACCES; }

static mcp_status run_probe(mcp_kernel_ctx *ctx)
{
    const probe_action *a = find_action(mcp_kattr_string(ctx, "action", NULL));
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!a) return mcp_kfail(ctx, MCP_STATUS_INVALID_MODEL, "attribute 'action' must be socket, exec or open");
    if (!x || x->dtype != MCP_DTYPE_FLOAT) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 0 must be a float tensor");
    errno = 0;
    if (a->run() != 0 && refused(errno)) {
        int e = errno;
        return mcp_kfail(ctx, MCP_STATUS_RUNTIME_ERROR, "%s: %s", a->call, strerror(e));
    }
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, MCP_DTYPE_FLOAT, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (y->data != x->data) memcpy(y->data, x->data, mcp_tensor_nbytes(x));
    return MCP_STATUS_OK;
}

static mcp_status check_probe(const mcp_node *node, const mcp_graph *graph, mcp_err *err)
{
    (void)graph;
    if (node->n_inputs != 1 || node->n_outputs != 1)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "SandboxProbe takes one input and gives one output");
    if (!find_action(mcp_node_attr_string(node, "action", NULL)))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'action' must be socket, exec or open");
    return MCP_STATUS_OK;
}

static const mcp_kernel_def probe_kernel = {
    .domain = "mcp.test",
    .op_type = "SandboxProbe",
    .since_version = 1,
    .run = run_probe,
    .check = check_probe,
};

static const mcp_kernel_def *probe_supports(const mcp_node *node, const mcp_graph *graph)
{
    (void)graph;
    if (strcmp(node->domain, probe_kernel.domain) != 0 || strcmp(node->op_type, probe_kernel.op_type) != 0) return NULL;
    return node->opset >= probe_kernel.since_version ? &probe_kernel : NULL;
}

const mcp_backend mcp__test_backend = {
    .api_version = MCP_KERNEL_API_VERSION,
    .name = "test",
    .priority = 0,
    .supports = probe_supports,
};
