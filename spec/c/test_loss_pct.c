/*
 * C unit tests of the one derivation of loss percent: ql_entry_finish
 * (engine/record.c) derives an entry's lost_pct from its counters with
 * ql_loss_pct, and an entry that crosses the wire (the live interval codec)
 * comes back with it derived the same way; the binding and the Lua writers
 * only read it.
 */
#include "ctest.h"

#include <string.h>
#include <stdlib.h>

#include "engine/record.h"
#include "engine/results_json.h"
#include "engine/stats.h"

TEST(entry_finish_derives_loss)
{
	ql_entry x;
	memset(&x, 0, sizeof x);
	x.valid = QL_E_UDPRX;
	x.unique_packets = 3;
	x.lost_packets = 1;
	x.bytes = 3000;
	x.seconds = 1.0;
	ql_entry_finish(&x);
	CHECK(x.lost_pct == 25.0);
	CHECK(x.lost_pct == ql_loss_pct(1, 4));
	CHECK(x.bits_per_second == 24000.0);
	/* nothing received or lost: no loss, not NaN */
	x.unique_packets = x.lost_packets = 0;
	ql_entry_finish(&x);
	CHECK(x.lost_pct == 0.0);
	/* a TCP entry has no UDP books: its lost_pct is left alone */
	ql_entry y;
	memset(&y, 0, sizeof y);
	y.lost_packets = 5;
	ql_entry_finish(&y);
	CHECK(y.lost_pct == 0.0);
}

TEST(codec_entries_come_back_with_the_same_loss)
{
	ql_entry e;
	memset(&e, 0, sizeof e);
	e.id = 1;
	e.valid = QL_E_UDPRX | QL_E_PACKETS;
	e.role = QL_ROLE_RECEIVER;
	e.side = QL_SIDE_SERVER;
	e.bytes = 9000;
	e.seconds = 1.0;
	e.packets = 9;
	e.unique_packets = 9;
	e.lost_packets = 3;
	ql_entry_finish(&e);
	ql_interval iv;
	memset(&iv, 0, sizeof iv);
	iv.start_s = 0;
	iv.end_s = iv.seconds = 1.0;
	iv.nentries = 1;
	iv.entries = &e;
	char *text = ql_interval_encode(&iv);
	CHECK(text != NULL);
	if (!text)
		return;
	ql_interval back;
	ql_err err;
	memset(&back, 0, sizeof back);
	CHECK_EQ_INT(ql_interval_parse(text, strlen(text), &back, &err), 0);
	free(text);
	CHECK_EQ_INT(back.nentries, 1);
	if (back.nentries == 1) {
		CHECK_EQ_U64(back.entries[0].lost_packets, 3);
		CHECK(back.entries[0].lost_pct == e.lost_pct);
		CHECK(back.entries[0].lost_pct == ql_loss_pct(3, 12));
	}
	ql_interval_clear(&back);
}

int main(void)
{
	RUN(entry_finish_derives_loss);
	RUN(codec_entries_come_back_with_the_same_loss);
	return ctest_done();
}
