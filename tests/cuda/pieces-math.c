// SPDX-License-Identifier: MIT
/*
 * The piece arithmetic of libpin/core/cuda_pieces.h for sizes no test
 * machine can allocate, computed without touching memory: 1 TiB and
 * more in 32 GiB pieces (PIN_CUDA_CHUNK_MAX), owner mappings (at region
 * offset 0) and views that start inside a piece. Every byte is covered
 * once, in order, no piece is longer than the piece size, and every cut
 * falls on a region offset that is a multiple of it.
 */
#include "cuda-test.h"
#include "../../libpin/core/cuda_pieces.h"

#define GiB (1ULL << 30)
#define TiB (1ULL << 40)

/* Walk every piece; n is their number, last the length of the last. */
static void walk(uint64_t start, uint64_t length, uint64_t piece,
		 uint64_t want_n, uint64_t want_last)
{
	uint64_t i, off, len, next = 0;
	uint64_t n = pin__cuda_nr_pieces(start, length, piece);

	CHECK(n == want_n, "start %llu length %llu piece %llu: %llu pieces, want %llu",
	      (unsigned long long)start, (unsigned long long)length,
	      (unsigned long long)piece, (unsigned long long)n,
	      (unsigned long long)want_n);
	for (i = 0; i < n; i++) {
		pin__cuda_piece(start, length, piece, i, &off, &len);
		CHECK(off == next && len > 0 && len <= piece,
		      "piece %llu: [%llu, +%llu), want it at %llu",
		      (unsigned long long)i, (unsigned long long)off,
		      (unsigned long long)len, (unsigned long long)next);
		CHECK(i == 0 || (start + off) % piece == 0,
		      "piece %llu starts at region offset %llu",
		      (unsigned long long)i,
		      (unsigned long long)(start + off));
		next = off + len;
	}
	CHECK(next == length, "pieces end at %llu of %llu",
	      (unsigned long long)next, (unsigned long long)length);
	CHECK(len == want_last, "last piece %llu bytes, want %llu",
	      (unsigned long long)len, (unsigned long long)want_last);
}

int main(void)
{
	const uint64_t P = PIN_CUDA_CHUNK_MAX;

	/* Well under the sizes drivers refuse or fail on (96 GiB and up),
	 * and a multiple of every huge page size (2 MiB, 1 GiB). */
	CHECK(P == 32 * GiB && P % GiB == 0, "PIN_CUDA_CHUNK_MAX %llu",
	      (unsigned long long)P);
	walk(0, 2 * MiB, P, 1, 2 * MiB);
	walk(0, P, P, 1, P);
	walk(0, P + 2 * MiB, P, 2, 2 * MiB);
	walk(0, 512 * GiB, P, 16, P);		/* refused in one call */
	walk(0, TiB, P, 32, P);
	walk(0, TiB + 2 * MiB, P, 33, 2 * MiB);
	walk(0, 4 * TiB - 2 * MiB, P, 128, P - 2 * MiB);
	/* A view of a 1 TiB region from 1 GiB on: cut at 32 GiB offsets. */
	walk(GiB, TiB - GiB, P, 32, P);
	walk(GiB, TiB, P, 33, GiB);
	walk(P - 2 * MiB, 4 * MiB, P, 2, 2 * MiB);
	walk(3 * P + 4096, 4096, P, 1, 4096);
	/* The lowered piece sizes tests use. */
	walk(0, 18 * MiB, 4 * MiB, 5, 2 * MiB);
	walk(2 * MiB, 10 * MiB, 4 * MiB, 3, 4 * MiB);
	walk(0, TiB, 2 * MiB, TiB / (2 * MiB), 2 * MiB);
	return 0;
}
