/*
 * rng.h - the random sources of the impairment model.
 *
 * ql_rng_taus is L'Ecuyer's four-component Tausworthe generator (LFSR113)
 * seeded from a u64 the way the kernel's prandom_seed_state() does, so a
 * seeded model draws the very numbers a seeded sch_netem draws from its
 * private generator. ql_rng_aux (splitmix64) stands in for the kernel's
 * get_random_u32(), which netem uses where the seed does not reach
 * (correlation start values, the corrupted byte and bit, slot lengths):
 * keeping those draws off the main stream keeps its order the kernel's.
 * ql_crnd is netem's correlated generator: each value mixes a fresh
 * uniform number with the previous value, weighted by rho.
 * Stands on nothing but <stdint.h>.
 */
#ifndef QL_IMPAIR_RNG_H
#define QL_IMPAIR_RNG_H

#include <stdint.h>

typedef struct ql_rng_taus {
	uint32_t s1, s2, s3, s4;
} ql_rng_taus;

/* Seed as prandom_seed_state(): i = low 32 bits of
 * (seed >> 32) ^ (seed << 10) ^ seed; each component gets i, raised
 * past its minimum (2, 8, 16, 128) when below it. */
void ql_rng_taus_seed(ql_rng_taus *r, uint64_t seed);
uint32_t ql_rng_taus_next(ql_rng_taus *r);

typedef struct ql_rng_aux {
	uint64_t x;
} ql_rng_aux;

void ql_rng_aux_seed(ql_rng_aux *r, uint64_t seed);
uint32_t ql_rng_aux_next(ql_rng_aux *r);
/* Uniform in [0, n) for n >= 1 (multiply-shift, as get_random_u32_below). */
uint32_t ql_rng_aux_below(ql_rng_aux *r, uint32_t n);

/* Correlated uniform source: rho = 0 is plain ql_rng_taus_next. */
typedef struct ql_crnd {
	uint32_t last, rho;
} ql_crnd;

/* rho as the spec's *_corr_frac32; last starts at a value from aux (the
 * kernel takes it from get_random_u32()). */
void ql_crnd_init(ql_crnd *c, uint32_t rho, ql_rng_aux *aux);
/* (u * (2^32 - (rho + 1)) + last * (rho + 1)) >> 32 with u fresh from r;
 * the result becomes last. */
uint32_t ql_crnd_next(ql_crnd *c, ql_rng_taus *r);

#endif
