/* Writes the seed corpus of fuzz_coord into a directory: the keys and
 * records of a real coordinator index (a job with a policy, a two-rank
 * version committed at two tiers, a newer one half saved, an agent, a copy
 * marked DELETING by retention), read back from its LMDB tables, plus a
 * record of the next record version and one with a field appended.
 * usage: ckptd_coord_make_corpus DIR   (DIR: tests/fuzz/corpus/coord) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord_int.h"
#include "helpers.h"

#define PER_TABLE 3 /* entries kept per table: a few KiB in all */

static void put(const char *dir, const char *name, const void *b, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f))
		T_FAIL("cannot write %s", path);
}

static void dump(ckptd_coord *c, MDB_txn *txn, MDB_dbi dbi, const char *table, const char *dir)
{
	MDB_cursor *cur;
	MDB_val k, v;
	T_ASSERT(mdb_cursor_open(txn, dbi, &cur) == 0);
	int i = 0, rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	for (; rc == 0 && i < PER_TABLE; i++, rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		char name[64];
		snprintf(name, sizeof(name), "%s-key-%d", table, i);
		put(dir, name, k.mv_data, k.mv_size);
		if (v.mv_size) { /* bynode values are empty */
			snprintf(name, sizeof(name), "%s-val-%d", table, i);
			put(dir, name, v.mv_data, v.mv_size);
		}
	}
	T_ASSERT(rc == 0 || rc == MDB_NOTFOUND);
	T_ASSERT(i > 0);
	mdb_cursor_close(cur);
	(void)c;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	char *db = t_tmpdir("coord-corpus");
	ckptd_coord *c;
	T_OK(ckptd_coord_open(db, 64 << 20, &c));

	ckptd_coord_policy p = { .keep_dram = 1, .keep_disk = 2, .keep_every = 100 };
	T_OK(ckptd_coord_job_set(c, "train-7b", 2, &p));
	T_OK(ckptd_coord_agent_hello(c, "node-a", "10.0.0.1:7070", "rack1", 1000));
	T_OK(ckptd_coord_agent_hello(c, "node-b", "unix:/run/ckptd.sock", "", 2000));
	uint32_t cm;
	/* Version 100: both ranks at LOCAL_MEM and LOCAL_DISK (committed). */
	for (uint32_t r = 0; r < 2; r++) {
		const char *node = r ? "node-b" : "node-a";
		T_OK(ckptd_coord_shard_done(c, "train-7b", 100, r, 2, CKPT_TIER_LOCAL_MEM, node,
		                            1u << 20, 0x1111 + r, 0xabc, &cm));
		T_OK(ckptd_coord_shard_done(c, "train-7b", 100, r, 2, CKPT_TIER_LOCAL_DISK, node,
		                            1u << 20, 0x1111 + r, 0xabc, &cm));
	}
	/* Version 200: both ranks at LOCAL_MEM (committed, newest), so that
	 * retention marks version 100's DRAM copies DELETING. */
	for (uint32_t r = 0; r < 2; r++)
		T_OK(ckptd_coord_shard_done(c, "train-7b", 200, r, 2, CKPT_TIER_LOCAL_MEM,
		                            r ? "node-b" : "node-a", 1u << 20, 0x2222 + r, 0xabc, &cm));
	/* Version 300: one rank of two, at PEER_MEM (pending). */
	T_OK(ckptd_coord_shard_done(c, "train-7b", 300, 1, 2, CKPT_TIER_PEER_MEM, "node-a",
	                            1u << 20, 0x3333, 0xdef, &cm));
	ckptd_coord_delete *del;
	size_t nd;
	T_OK(ckptd_coord_retention(c, "train-7b", NULL, &del, &nd));
	T_ASSERT(nd > 0);
	free(del);

	MDB_txn *txn;
	T_ASSERT(mdb_txn_begin(c->env, NULL, MDB_RDONLY, &txn) == 0);
	dump(c, txn, c->jobs, "jobs", dir);
	dump(c, txn, c->versions, "versions", dir);
	dump(c, txn, c->shards, "shards", dir);
	dump(c, txn, c->copies, "copies", dir);
	dump(c, txn, c->bynode, "bynode", dir);
	dump(c, txn, c->agents, "agents", dir);

	/* A record of the next record version (-CKPT_EFORMAT), and one with a
	 * field appended (accepted), from a real version record. */
	MDB_cursor *cur;
	MDB_val k, v;
	T_ASSERT(mdb_cursor_open(txn, c->versions, &cur) == 0);
	T_ASSERT(mdb_cursor_get(cur, &k, &v, MDB_FIRST) == 0);
	uint8_t b[CKPTD_VREC_LEN + 8];
	T_ASSERT(v.mv_size == CKPTD_VREC_LEN);
	memcpy(b, v.mv_data, CKPTD_VREC_LEN);
	memset(b + CKPTD_VREC_LEN, 0x5a, 8);
	put(dir, "versions-val-appended", b, sizeof(b));
	ckpt__put_le32(b, CKPTD_REC_VERSION + 1);
	put(dir, "versions-val-newer", b, CKPTD_VREC_LEN);
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	ckptd_coord_close(c);
	t_rmrf(db);
	return 0;
}
