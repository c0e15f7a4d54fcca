/* Replays a fuzz corpus through a libFuzzer target without libFuzzer, so
 * CI can run every corpus file under gcc and the sanitizer build:
 *   fuzz_replay_X FILE_OR_DIR... */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    uint8_t *buf;
    size_t len;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    if (mcp_file_read(path, &buf, &len, &err) != MCP_STATUS_OK) {
        fprintf(stderr, "replay: %s\n", msg);
        return 1;
    }
    LLVMFuzzerTestOneInput(buf, len);
    /* Every prefix too: truncated inputs are the most common corruption. */
    for (size_t cut = 0; cut < len; cut += 1 + len / 64) LLVMFuzzerTestOneInput(buf, cut);
    mcp_free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: cannot stat '%s'\n", argv[i]);
            return 1;
        }
        if (S_ISDIR(sb.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.') continue;
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
                rc |= replay_file(p);
                files++;
            }
            if (d) closedir(d);
        } else {
            rc |= replay_file(argv[i]);
            files++;
        }
    }
    printf("replayed %d corpus files\n", files);
    return rc || files == 0;
}
