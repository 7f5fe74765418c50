/* The messages of a control exchange that failed (fail_io): each says what
 * happened once, with its code beside it. A timeout read "peer silent
 * during the control exchange (timed out)", shown as "... (timed out)
 * (ETIMEDOUT)" with the code appended. */
#include "ctest.h"

#include <errno.h>
#include <string.h>

#include "engine/test.h"
#include "err.h"

TEST(timeout_said_once_without_parentheses)
{
	ql_test *t = test_new(QL_SIDE_CLIENT);
	CHECK(t != NULL);
	if (!t)
		return;
	CHECK(fail_io(t, -ETIMEDOUT, "the control exchange") < 0);
	CHECK_STR(t->err.msg, "peer silent during the control exchange: timed out");
	CHECK_STR(t->err.code, "ETIMEDOUT");
	CHECK(strchr(t->err.msg, '(') == NULL);
	ql_test_free(t);
}

int main(void)
{
	RUN(timeout_said_once_without_parentheses);
	return ctest_done();
}
