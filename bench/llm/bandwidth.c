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
            size_t lo = n / nt * id, hi = id == nt - 1 ? n : n / nt * (id + 1);
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
            for (size_t i = lo; i + 8 <= hi; i += 8) {
                s0 += a[i], s1 += a[i + 1], s2 += a[i + 2], s3 += a[i + 3];
                s4 += a[i + 4], s5 += a[i + 5], s6 += a[i + 6], s7 += a[i + 7];
            }
            total = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
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
