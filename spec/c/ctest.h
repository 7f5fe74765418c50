/*
 * ctest.h - a minimal unit-test harness for csrc/core (no Lua).
 *
 *   TEST(name) { CHECK(expr); CHECK_EQ_INT(a, b); ... }
 *   int main(void) { RUN(name); ...; return ctest_done(); }
 *
 * Prints "ok - name" / "not ok - name" per test and a last line
 * "ctest: N passed, N failed, N skipped" read by spec/support/run-ctests.sh.
 * SKIP("reason") inside a test marks it skipped (only where the machine
 * truly lacks a capability).
 */
#ifndef CTEST_H
#define CTEST_H
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int ctest_passed, ctest_failed, ctest_skipped;
static int ctest_cur_failed, ctest_cur_skipped;

#define TEST(name) static void name(void)
#define CHECK(expr) do { if (!(expr)) { \
	fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #expr); \
	ctest_cur_failed = 1; } } while (0)
#define CHECK_EQ_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); \
	if (_a != _b) { fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n", \
	__FILE__, __LINE__, #a, #b, _a, _b); ctest_cur_failed = 1; } } while (0)
#define CHECK_EQ_U64(a, b) do { uint64_t _a = (uint64_t)(a), _b = (uint64_t)(b); \
	if (_a != _b) { fprintf(stderr, "  %s:%d: %s == %s failed: %" PRIu64 " != %" PRIu64 "\n", \
	__FILE__, __LINE__, #a, #b, _a, _b); ctest_cur_failed = 1; } } while (0)
#define CHECK_STR(a, b) do { const char *_a = (a), *_b = (b); \
	if (strcmp(_a, _b) != 0) { fprintf(stderr, "  %s:%d: \"%s\" != \"%s\"\n", \
	__FILE__, __LINE__, _a, _b); ctest_cur_failed = 1; } } while (0)
#define CHECK_NEAR(a, b, tol) do { double _a = (a), _b = (b); \
	if (!(_a - _b <= (tol) && _b - _a <= (tol))) { fprintf(stderr, \
	"  %s:%d: %s ~ %s failed: %.9g vs %.9g (tol %g)\n", __FILE__, __LINE__, \
	#a, #b, _a, _b, (double)(tol)); ctest_cur_failed = 1; } } while (0)
#define SKIP(reason) do { printf("  skip: %s\n", reason); ctest_cur_skipped = 1; return; } while (0)
#define RUN(name) do { ctest_cur_failed = 0; ctest_cur_skipped = 0; name(); \
	if (ctest_cur_skipped && !ctest_cur_failed) { ctest_skipped++; printf("skip - %s\n", #name); } \
	else if (ctest_cur_failed) { ctest_failed++; printf("not ok - %s\n", #name); } \
	else { ctest_passed++; printf("ok - %s\n", #name); } } while (0)

static inline int ctest_done(void)
{
	printf("ctest: %d passed, %d failed, %d skipped\n", ctest_passed,
	       ctest_failed, ctest_skipped);
	return ctest_failed ? 1 : 0;
}
#endif
