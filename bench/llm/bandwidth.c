/* Streaming read bandwidth: the ceiling of a decode step, which reads every
 * weight once. Sums a buffer far larger than the caches with T threads (each
 * its own contiguous share, as the decode kernels split the weights) and
 * prints the best of several passes in GB/s.
 *   cc -O3 -march=native -fopenmp bandwidth.c -o bandwidth && ./bandwidth 2 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef float v16 __attribute__((vector_size(64)));

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    size_t n = (size_t)1 << 27; /* 128 Mi floats: 512 MiB */
    float *a = aligned_alloc(64, n * sizeof *a);
    if (!a) return 1;
    memset(a, 1, n * sizeof *a);
    double best = 1e30, sink = 0;
    for (int pass = 0; pass < 6; pass++) {
        double t0 = now(), total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            int id = omp_get_thread_num(), nt = omp_get_num_threads();
            const size_t share = n / (size_t)nt / 16 * 16; /* whole vectors, so v16 loads stay aligned */
            size_t lo = share * (size_t)id, hi = id == nt - 1 ? n : share * (size_t)(id + 1);
            /* Four independent vector sums: enough loads in flight that
             * memory, not the adds' latency, sets the pace (scalar sums
             * measure less than half of what one core can stream). */
            const v16 *v = (const v16 *)(const void *)(a + lo);
            const size_t nv = (hi - lo) / 16;
            v16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
            size_t i = 0;
            for (; i + 4 <= nv; i += 4) s0 += v[i], s1 += v[i + 1], s2 += v[i + 2], s3 += v[i + 3];
            for (; i < nv; i++) s0 += v[i];
            v16 s = s0 + s1 + s2 + s3;
            for (int j = 0; j < 16; j++) total += s[j];
        }
        double dt = now() - t0;
        sink += total;
        if (pass > 0 && dt < best) best = dt;
    }
    printf("%.2f\n", (double)(n * sizeof *a) / best / 1e9);
    fprintf(stderr, "(checksum %g)\n", sink);
    free(a);
    return 0;
}
