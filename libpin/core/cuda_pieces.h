/* SPDX-License-Identifier: MIT */
/*
 * The pieces a CUDA registration is made of (cuda.c): pure arithmetic, no
 * memory touched, so that sizes far beyond what a test machine can
 * allocate (1 TiB and more) are checked as they are computed.
 *
 * A mapping of length bytes starts at offset start of its region. It is cut
 * at every region offset that is a multiple of piece (a multiple of the
 * region's 2 MiB chunk), so every cut falls on a chunk (and huge page)
 * boundary of the region whatever the mapping's own start: piece i is
 * [off, off + len) of the mapping, with off and len from pin__cuda_piece.
 * Together the pieces cover every byte of [0, length) once, in order, and
 * none is longer than piece. length and piece are > 0.
 */
#ifndef LIBPIN_CUDA_PIECES_H
#define LIBPIN_CUDA_PIECES_H

#include <stdint.h>

/* How far into its first piece the mapping starts. */
static inline uint64_t pin__cuda_head(uint64_t start, uint64_t piece)
{
	return start % piece;
}

static inline uint64_t pin__cuda_nr_pieces(uint64_t start, uint64_t length,
					   uint64_t piece)
{
	uint64_t head = pin__cuda_head(start, piece);

	/* Written so that it cannot wrap for lengths up to 2^64 - piece. */
	return length / piece + (length % piece + head + piece - 1) / piece;
}

/* Piece i (< pin__cuda_nr_pieces) of the mapping: its offset and length. */
static inline void pin__cuda_piece(uint64_t start, uint64_t length,
				   uint64_t piece, uint64_t i,
				   uint64_t *off, uint64_t *len)
{
	uint64_t head = pin__cuda_head(start, piece);
	uint64_t lo = i ? i * piece - head : 0;
	uint64_t hi = (i + 1) * piece - head;

	if (hi > length)
		hi = length;
	*off = lo;
	*len = hi - lo;
}

#endif /* LIBPIN_CUDA_PIECES_H */
