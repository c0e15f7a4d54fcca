/*
 * descriptor_check: validates descriptors with the registry's own parser,
 * independent of mcpctl, for the schema-agreement test and by hand.
 *
 *   descriptor_check FILE.yaml...     prints "FILE: valid" or the problems
 *   descriptor_check --triton DIR...  the same for Triton model folders
 *   descriptor_check --dump FILE      prints the parsed fields
 *
 * Exit status: 0 when every input is valid, 1 otherwise, 2 on bad usage.
 */
#include <stdio.h>
#include <string.h>

#include "registry/registry.h"

static void dump(const mcp_descriptor *d)
{
    printf("name=%s\nversion=%s\nformat=%s\npath=%s\ndevice=%s\nprecision=%s\n", d->name, d->version, d->format,
           d->path ? d->path : "(none)", d->device, d->precision);
    printf("max_batch_size=%lld\nbatching.enabled=%d\nbatching.max_queue_delay_us=%lld\nbatching.max_queue_size=%lld\n",
           (long long)d->max_batch_size, d->batching.enabled, (long long)d->batching.max_queue_delay_us,
           (long long)d->batching.max_queue_size);
    printf("batching.timeout_us=%lld\nbatching.prefetch_queue_depth=%lld\nbatching.enable_tensor_cache=%d\n",
           (long long)d->batching.default_timeout_us, (long long)d->batching.prefetch_queue_depth,
           d->batching.enable_tensor_cache);
    printf("instances.count=%lld\ninstances.threads=%lld\n", (long long)d->instance_count,
           (long long)d->instance_threads);
    for (int side = 0; side < 2; side++) {
        const mcp_io_spec *io = side ? d->outputs : d->inputs;
        int n = side ? d->n_outputs : d->n_inputs;
        for (int i = 0; i < n; i++) {
            printf("%s[%d]=%s dtype=%s graph_name=%s shape=", side ? "outputs" : "inputs", i, io[i].name,
                   mcp_dtype_name(io[i].dtype), io[i].graph_name ? io[i].graph_name : "-");
            if (io[i].rank < 0) printf("(model)");
            for (int k = 0; k < io[i].rank; k++) printf("%s%lld", k ? "," : "[", (long long)io[i].dims[k]);
            printf("%s\n", io[i].rank > 0 ? "]" : io[i].rank == 0 ? "[]" : "");
        }
    }
    printf("steps=%d,%d\n", d->n_pre, d->n_post);
}

int main(int argc, char **argv)
{
    bool triton = false, want_dump = false;
    int files = 0, bad = 0;
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--triton") == 0) {
            triton = true;
            continue;
        }
        if (strcmp(argv[i], "--dump") == 0) {
            want_dump = true;
            continue;
        }
        mcp_diags diags = {0};
        mcp_descriptor *d = NULL;
        mcp_status st = triton ? mcp_descriptor_load_triton(argv[i], &defaults, &d, &diags)
                               : mcp_descriptor_load_file(argv[i], &defaults, &d, &diags);
        files++;
        static char report[1 << 16];
        mcp_diags_format(&diags, argv[i], report, sizeof report);
        if (st == MCP_STATUS_OK) {
            printf("%s: valid\n", argv[i]);
            fputs(report, stdout); /* warnings, if any */
            if (want_dump) dump(d);
        } else {
            bad++;
            printf("%s: invalid (%s)\n", argv[i], mcp_status_str(st));
            fputs(report, stdout);
        }
        mcp_descriptor_free(d);
        mcp_diags_clear(&diags);
    }
    if (files == 0) {
        fprintf(stderr, "usage: descriptor_check [--dump] [--triton] FILE_OR_DIR...\n");
        return 2;
    }
    return bad ? 1 : 0;
}
