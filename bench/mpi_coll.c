/*
 * mpi_coll.c - the peer: OpenMPI's collectives on the same machine, the
 * same totals as bench_coll. For TOTAL MiB of fp32:
 *   MPI_Allgather           each rank gives TOTAL/P, receives TOTAL;
 *   MPI_Reduce_scatter_block each rank gives TOTAL, receives TOTAL/P summed;
 *   MPI_Allreduce           TOTAL in, TOTAL summed out.
 * GB/s = TOTAL per the slowest rank's time (as bench_coll reports).
 * Buffers are allocated and touched once, outside the timing. Medians of
 * REPS after one warm-up, min-max. Rank 0 prints markdown rows.
 *
 *   mpirun -np 2 ... bench_mpi_coll LABEL REPS MIB [MIB...]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/timing.h"

static void row(int me, const char *label, const char *what, double mib, double *sec, int n)
{
	double gbs[64] = {0}, lo, hi, med;
	if (me || n < 1 || n > 64)
		return;
	for (int i = 0; i < n; i++)
		gbs[i] = mib * 1048576.0 / sec[i] / 1e9;
	med = bench_spread(gbs, n, &lo, &hi);
	printf("| MPI %s | %s | %.0f MiB | %.2f | %.2f-%.2f |\n", label, what, mib, med, lo, hi);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int me, np, reps;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	if (argc < 4) {
		if (!me)
			fprintf(stderr, "usage: bench_mpi_coll LABEL REPS MIB [MIB...]\n");
		MPI_Finalize();
		return 2;
	}
	reps = atoi(argv[2]);
	if (reps < 1 || reps > 63)
		reps = 5;
	for (int a = 3; a < argc; a++) {
		double mib = atof(argv[a]), t[3][64];
		size_t n = (size_t)(mib * 262144.0), per = n / (size_t)np;
		float *in = malloc(n * 4), *out = malloc(n * 4);
		for (size_t i = 0; i < n; i++) {
			in[i] = (float)(i % 1000) * 1e-3f;
			out[i] = 0;
		}
		for (int op = 0; op < 3; op++)
			for (int r = 0; r <= reps; r++) {
				double t0, dt, mx;
				MPI_Barrier(MPI_COMM_WORLD);
				t0 = MPI_Wtime();
				if (op == 0)
					MPI_Allgather(in, (int)per, MPI_FLOAT, out, (int)per, MPI_FLOAT,
						      MPI_COMM_WORLD);
				else if (op == 1)
					MPI_Reduce_scatter_block(in, out, (int)per, MPI_FLOAT, MPI_SUM,
								 MPI_COMM_WORLD);
				else
					MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM,
						      MPI_COMM_WORLD);
				dt = MPI_Wtime() - t0;
				MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
				if (r)
					t[op][r - 1] = mx;
			}
		row(me, argv[1], "gather (allgather)", mib, t[0], reps);
		row(me, argv[1], "push + reduce (reduce-scatter)", mib, t[1], reps);
		row(me, argv[1], "push + gather (allreduce)", mib, t[2], reps);
		free(in);
		free(out);
	}
	MPI_Finalize();
	return 0;
}
