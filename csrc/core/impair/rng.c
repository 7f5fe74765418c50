/*
 * rng.c - the impairment model's random sources (see rng.h): LFSR113 with
 * the kernel's seeding, a splitmix64 side stream, netem's correlated mix.
 */
#include "rng.h"

static uint32_t seed_min(uint32_t x, uint32_t m)
{
	return x < m ? x + m : x;
}

void ql_rng_taus_seed(ql_rng_taus *r, uint64_t seed)
{
	uint32_t i = (uint32_t)((seed >> 32) ^ (seed << 10) ^ seed);
	r->s1 = seed_min(i, 2u);
	r->s2 = seed_min(i, 8u);
	r->s3 = seed_min(i, 16u);
	r->s4 = seed_min(i, 128u);
}

/* One LFSR113 component: ((z << q) ^ z) >> s mixed into (z & mask) << k,
 * with L'Ecuyer's published LFSR113 constants (those the kernel uses). */
static uint32_t taus_step(uint32_t z, unsigned q, unsigned sh, uint32_t mask, unsigned ks)
{
	uint32_t b = ((z << q) ^ z) >> sh;
	return ((z & mask) << ks) ^ b;
}

uint32_t ql_rng_taus_next(ql_rng_taus *r)
{
	r->s1 = taus_step(r->s1, 6, 13, 0xfffffffeu, 18);
	r->s2 = taus_step(r->s2, 2, 27, 0xfffffff8u, 2);
	r->s3 = taus_step(r->s3, 13, 21, 0xfffffff0u, 7);
	r->s4 = taus_step(r->s4, 3, 12, 0xffffff80u, 13);
	return r->s1 ^ r->s2 ^ r->s3 ^ r->s4;
}

void ql_rng_aux_seed(ql_rng_aux *r, uint64_t seed)
{
	r->x = seed ^ 0x6a09e667f3bcc909ull;
}

uint32_t ql_rng_aux_next(ql_rng_aux *r)
{
	uint64_t z = (r->x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
}

uint32_t ql_rng_aux_below(ql_rng_aux *r, uint32_t n)
{
	return (uint32_t)(((uint64_t)ql_rng_aux_next(r) * n) >> 32);
}

void ql_crnd_init(ql_crnd *c, uint32_t rho, ql_rng_aux *aux)
{
	c->rho = rho;
	c->last = ql_rng_aux_next(aux);
}

uint32_t ql_crnd_next(ql_crnd *c, ql_rng_taus *r)
{
	uint64_t u = ql_rng_taus_next(r);
	if (c->rho == 0)
		return (uint32_t)u;
	uint64_t w = (uint64_t)c->rho + 1;
	/* u * (2^32 - w) + last * w < 2^64: both weights sum to 2^32. */
	c->last = (uint32_t)((u * ((1ull << 32) - w) + (uint64_t)c->last * w) >> 32);
	return c->last;
}
