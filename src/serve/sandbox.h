/*
 * The sandbox (private to src/serve/ and the server's main): what the
 * threads that touch models may do once the server has started.
 *
 * An inference thread (an instance worker, a generation step loop) calls
 * mcp_sandbox_enter_inference first thing: from then on it, and the threads
 * it starts (OpenMP's and oneDNN's workers), run under a seccomp filter
 * that allows what running a model needs (memory, locks, clocks, threads,
 * writes to descriptors the server already holds) and answers every other
 * system call with EPERM. A kernel that tries to open a file, a socket or
 * to run a program sees EPERM and fails its request; nothing is killed.
 *
 * A model loader thread calls mcp_sandbox_enter_loader first thing: with
 * Landlock, it and the threads it starts (the instances of the models it
 * loads) may open files for reading beneath the model folders only, and
 * write beneath the store folder only.
 *
 * The settings are the process's: seccomp and Landlock confine threads of
 * this process, and the threads that enter are started deep in the serving
 * layers, which have no handle to carry them. They are set once at
 * start-up, before any model loads; until then the sandbox is on for
 * inference threads and loaders are not confined (no folders to confine
 * them to).
 */
#ifndef MCP_SERVE_SANDBOX_H
#define MCP_SERVE_SANDBOX_H

#include <stdbool.h>

#include "base/base.h"

/* A message for the operator; the sandbox never prints. */
typedef void (*mcp_sandbox_say_fn)(void *user, bool warning, const char *msg);

/*
 * The process's settings. read_paths: folders (or single files) a loader
 * may read beneath, the model roots; write_dir: the store folder a loader
 * may also write beneath, or NULL. The strings are copied. say receives the
 * warnings of mcp_sandbox_enter_*_or_warn (may be NULL). Not thread-safe:
 * call it before the threads that enter the sandbox exist.
 */
void mcp_sandbox_configure(bool enabled, const char *const *read_paths, int n_read, const char *write_dir,
                           mcp_sandbox_say_fn say, void *say_user);
bool mcp_sandbox_enabled(void);

/*
 * Puts the calling thread under the inference filter (OK doing nothing when
 * the sandbox is off). Fails with UNSUPPORTED when the kernel has no
 * seccomp, or another status when the filter does not load; the thread
 * then runs unfiltered.
 */
mcp_status mcp_sandbox_enter_inference(mcp_err *err);

/*
 * Limits the calling thread's file access with Landlock (OK doing nothing
 * when the sandbox is off or was never configured). UNSUPPORTED when the
 * kernel has no usable Landlock; the thread then runs unconfined.
 */
mcp_status mcp_sandbox_enter_loader(mcp_err *err);

/* The two above, for the threads that serve: a failure is said once per
 * process (as a warning through the configured callback) and the thread
 * goes on unconfined; serving never stops for it. */
void mcp_sandbox_enter_inference_or_warn(void);
void mcp_sandbox_enter_loader_or_warn(void);

/* Says at start-up what is on: one line on the sandbox (the filter, and
 * Landlock or why not), one on per-model cgroup limits. Never fails. */
void mcp_sandbox_report(mcp_sandbox_say_fn say, void *user);

#endif
