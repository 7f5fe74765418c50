/* C tests of csrc/core/textfile.c: bounded reads that never block. */
#include "ctest.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "textfile.h"

static char dir[64];

static void setup_dir(void)
{
	snprintf(dir, sizeof dir, "/tmp/qlct-textfile-%d", (int)getpid());
	mkdir(dir, 0700);
}

TEST(regular_file_and_bound)
{
	char path[128];
	snprintf(path, sizeof path, "%s/a.txt", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fputs("line 1\nline\0two", f); /* fputs stops at the NUL: 11 bytes */
	fclose(f);
	char *buf;
	size_t len;
	ql_err e;
	CHECK_EQ_INT(ql_textfile_read(path, "plan file", 11, &buf, &len, &e), 0);
	CHECK_EQ_INT(len, 11);
	CHECK_STR(buf, "line 1\nline");
	free(buf);
	CHECK_EQ_INT(ql_textfile_read(path, "plan file", 10, &buf, &len, &e), -EFBIG);
	CHECK_STR(e.code, "EFBIG");
	CHECK(buf == NULL);
	CHECK_EQ_INT(e.usage, 0);
	unlink(path);
	CHECK_EQ_INT(ql_textfile_read(path, "plan file", 10, &buf, &len, &e), -ENOENT);
	CHECK_STR(e.code, "ENOENT");
	CHECK(strstr(e.msg, "plan file /tmp/qlct-textfile-") == e.msg);
}

TEST(refuses_what_could_block_or_not_end)
{
	char *buf;
	size_t len;
	ql_err e;
	CHECK_EQ_INT(ql_textfile_read(dir, "plan file", 1 << 20, &buf, &len, &e), -EISDIR);
	CHECK_STR(e.code, "EISDIR");
	CHECK_EQ_INT(ql_textfile_read("/dev/zero", "plan file", 1 << 20, &buf, &len, &e), -EINVAL);
	CHECK_STR(e.code, "EFTYPE");
	CHECK(strstr(e.msg, "a character device") != NULL);
	char fifo[128];
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
	/* nobody writes: an open(2) without O_NONBLOCK would wait for ever */
	CHECK_EQ_INT(ql_textfile_read(fifo, "plan file", 1 << 20, &buf, &len, &e), -EINVAL);
	CHECK_STR(e.code, "EFTYPE");
	CHECK(strstr(e.msg, "is a FIFO") != NULL);
	unlink(fifo);
}

/* /proc files say st_size 0: the bound holds on what read(2) returns. */
TEST(proc_file_without_size)
{
	char *buf;
	size_t len;
	ql_err e;
	CHECK_EQ_INT(ql_textfile_read("/proc/self/status", "file", 1 << 20, &buf, &len, &e), 0);
	CHECK(len > 100);
	CHECK(strncmp(buf, "Name:", 5) == 0);
	free(buf);
	CHECK_EQ_INT(ql_textfile_read("/proc/self/status", "file", 50, &buf, &len, &e), -EFBIG);
	CHECK_STR(e.code, "EFBIG");
}

int main(void)
{
	setup_dir();
	RUN(regular_file_and_bound);
	RUN(refuses_what_could_block_or_not_end);
	RUN(proc_file_without_size);
	rmdir(dir);
	return ctest_done();
}
