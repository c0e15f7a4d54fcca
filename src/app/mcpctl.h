/* mcpctl's commands that talk to a running server (mcpctl_client.c). */
#ifndef MCP_APP_MCPCTL_H
#define MCP_APP_MCPCTL_H

#include <stdbool.h>

/* Runs `cmd` (apply, get, describe, delete, validate, infer, bench) with the
 * arguments after it; returns the process exit status. Sets *handled to
 * false when cmd is not one of these. */
int mcpctl_client_main(const char *cmd, int argc, char **argv, bool *handled);
/* Extra lines for `mcpctl --help`. */
const char *mcpctl_client_usage(void);
int mcpctl_cmd_perf(int argc, char **argv); /* mcpctl perf (mcpctl_perf.c) */
int mcpctl_cmd_quantize(int argc, char **argv); /* mcpctl quantize (mcpctl_quantize.c) */
/* store, push, pull, diff on a local model store (mcpctl_store.c); same
 * contract as mcpctl_client_main. */
int mcpctl_store_main(const char *cmd, int argc, char **argv, bool *handled);
const char *mcpctl_store_usage(void);
/* generate, and inspect / perf of a GGUF file (mcpctl_llm.c); same contract. */
int mcpctl_llm_main(const char *cmd, int argc, char **argv, bool *handled);
bool mcpctl_is_gguf(const char *path);
/* mcpctl_gen.c: generation against a server (OpenAI completions, streamed). */
int mcpctl_generate_remote(const char *server, int argc, char **argv);
int mcpctl_bench_generate(const char *server, int argc, char **argv);

#endif
