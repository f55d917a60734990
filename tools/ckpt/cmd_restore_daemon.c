/* ckpt restore --daemon: a version restored from what this node holds, as
 * the library would read it. The coordinator says which ranks the version
 * has and where their copies are (copies.h); for each rank, this node's
 * agent says what it holds (LOCATE), and the copies are tried in the
 * library's order: node DRAM, the disk, a partner's copy held here, the
 * SHARED tree. Every rank is written into a staging directory first, every
 * chunk checked; only a whole version is published into --out. */
#include "cli.h"
#include "copies.h"
#include "wire/client.h"
#include "wire/fdpass.h"
#include "format/shared.h"
#include "format/s3tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* LOCATE on the agent: tiers this node holds (job, v, rank) in, its file's root. */
static int locate(cli *c, ckptd_client *cl, uint64_t v, uint32_t rank, ckptd_location *out)
{
	ckptd_msg req = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	snprintf(req.u.segment_request.job, sizeof(req.u.segment_request.job), "%s", c->job);
	req.u.segment_request.version = v;
	req.u.segment_request.rank = rank;
	req.u.segment_request.mode = CKPTD_SEG_LOCATE;
	int rc = cli_daemon_call(c, "restore", cl, &req, CKPTD_MSG_LOCATION, &rep);
	if (rc == EXIT_OK) {
		*out = rep.u.location;
		ckptd_msg_free(&rep);
	}
	return rc;
}

/* This rank's DRAM copy on this node, restored into outfd: its node-DRAM
 * copy (mode CKPTD_SEG_READ), or the partner copy this node holds of it
 * (CKPTD_SEG_PARTNER_COPY: a sealed copy of that shard alone, nothing to
 * release). */
static int restore_dram(cli *c, ckptd_client *cl, uint64_t v, uint32_t rank, uint32_t mode, int outfd, char *why,
                        size_t cap)
{
	ckptd_msg req = { .type = CKPTD_MSG_SEGMENT_REQUEST }, rep;
	snprintf(req.u.segment_request.job, sizeof(req.u.segment_request.job), "%s", c->job);
	req.u.segment_request.version = v;
	req.u.segment_request.rank = rank;
	req.u.segment_request.mode = mode;
	int err = ckptd_client_call(cl, &req, &rep);
	int fd = ckptd_client_take_fd(cl);
	if (err == 0 && rep.type != CKPTD_MSG_SEGMENT_GRANT) {
		snprintf(why, cap, "no DRAM grant: %.600s", rep.type == CKPTD_MSG_ERROR ? rep.u.error.text : "unexpected answer");
		err = -ENOENT;
	}
	if (err < 0) {
		if (fd >= 0)
			close(fd);
		ckptd_msg_free(&rep);
		return err;
	}
	ckptd_mapping map;
	uint64_t id = rep.u.segment_grant.segment_id;
	err = fd < 0 ? -EPROTO : ckptd_seg_map(fd, rep.u.segment_grant.offset, rep.u.segment_grant.bytes, 0, &map);
	ckptd_msg_free(&rep);
	if (fd >= 0)
		close(fd);
	if (err == 0) {
		cli_shard_src src = { .img = map.addr, .len = map.len };
		err = cli_restore_shard(c, &src, v, rank, outfd, why, cap);
		ckptd_seg_unmap(&map);
	}
	if (!id)
		return err;
	ckptd_msg rel = { .type = CKPTD_MSG_SEGMENT_RELEASE }, ok;
	rel.u.segment_release.segment_id = id;
	if (ckptd_client_call(cl, &rel, &ok) == 0)
		ckptd_msg_free(&ok);
	return err;
}

/* Empties a rank's staging directory after a copy that failed half way
 * (it may have left files), and opens it again; *dfd -1 on failure. */
static void restage(const char *dir, int *dfd)
{
	if (*dfd >= 0)
		close(*dfd);
	cli_remove_stage(dir);
	*dfd = -1;
	if (ckpt__mkdir_p(dir, 0700) == 0)
		*dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* The SHARED tier's marker of v: the directory tree's, or the object
 * store's (c->tree, opened for an s3:// --shared-dir). */
static int shared_marker(cli *c, const char *shared_dir, uint64_t v, ckpt_shared_mark *mk)
{
	char err[600];
	return c->tree ? ckpt__s3tree_marker_read(c->tree, c->job, v, mk, err, sizeof(err))
	               : ckpt__shared_marker_read(shared_dir, c->job, v, mk);
}

/* This rank's file in the SHARED tree: the version must be committed there
 * (the tree's marker, or a SHARED copy the coordinator records); its header
 * must be this rank's of the marker's run. -ENOENT: not there. */
static int restore_shared(cli *c, const char *shared_dir, uint64_t v, uint32_t r, const cli_copy *cp, size_t n, int dfd,
                          char *why, size_t cap)
{
	ckpt_shared_mark mk = { 0 };
	int listed = 0;
	for (size_t i = 0; i < n; i++)
		listed |= cp[i].rank == r && cp[i].tier == CKPT_TIER_SHARED && cp[i].live;
	int err = shared_marker(c, shared_dir, v, &mk);
	if (err < 0 && !listed) {
		snprintf(why, cap, "version %llu is not committed in %.300s (no marker, no SHARED copy recorded)",
		         (unsigned long long)v, shared_dir);
		return -ENOENT;
	}
	char path[4096];
	if (c->tree) { /* the object: -ENOENT when it is not there */
		if ((err = ckpt__s3tree_key(c->tree, path, sizeof(path), c->job, v, r)) < 0)
			return err;
		cli_shard_src src = { .tree = c->tree, .key = path, .lineage = mk.lineage };
		return cli_restore_shard(c, &src, v, r, dfd, why, cap);
	}
	if ((err = ckpt__shard_path(path, sizeof(path), shared_dir, c->job, v, r)) < 0)
		return err;
	if (access(path, F_OK) != 0) {
		snprintf(why, cap, "%.300s: %s", path, strerror(errno));
		return -ENOENT;
	}
	cli_shard_src src = { .path = path, .lineage = mk.lineage };
	return cli_restore_shard(c, &src, v, r, dfd, why, cap);
}

/* What a restore works from: the version, the coordinator's copies of it
 * (in rank order), its world size, and this node's name. */
typedef struct rplan {
	uint64_t v;
	cli_copy *cp;
	size_t n;
	uint32_t world;
	char node[CKPTD_NAME_MAX + 1];
} rplan;

/* Where the ranks came from, and those that did not. */
typedef struct rtally {
	uint32_t missing, corrupt, mem, disk, peer, shared;
} rtally;

/* The version and its copies; the SHARED tree's marker when the coordinator
 * lost track of it. Work later follows the ranks listed, never the world
 * size alone (it comes from ranks, or a buggy coordinator). */
static int restore_plan(cli *c, ckptd_client *cl, const char *shared_dir, rplan *p)
{
	uint32_t listed = 0;
	int rc;
	ckptd_msg st = { .type = CKPTD_MSG_STATUS }, srep;
	p->v = c->version;
	if ((p->v == VERSION_UNSET || p->v == VERSION_LATEST || p->v == VERSION_ALL) &&
	    (rc = cli_daemon_latest(c, "restore", cl, &p->v)))
		return rc;
	if ((rc = cli_collect_copies(c, "restore", cl, p->v, &p->cp, &p->n, &p->world, &listed))) {
		/* A coordinator that lost track of the version (every node
		 * replaced) while the SHARED tree marks it committed: the tree is
		 * enough, as it is for the library. */
		ckpt_shared_mark mk;
		if (rc != EXIT_NOTFOUND || !shared_dir || shared_marker(c, shared_dir, p->v, &mk) < 0 ||
		    !mk.world_size || mk.world_size > (1u << 20))
			return rc;
		fprintf(stderr, "ckpt restore: the SHARED tree marks version %llu committed (%u ranks): reading it there\n",
		        (unsigned long long)p->v, mk.world_size);
		p->world = listed = mk.world_size;
	}
	if (c->rank < 0 && listed < p->world) {
		fprintf(stderr, "ckpt restore: the coordinator lists copies of %u of version %llu's %u ranks; the others "
		        "have no copy to restore (give --rank for one that has)\n", listed, (unsigned long long)p->v,
		        p->world);
		return EXIT_NOTFOUND;
	}
	if ((rc = cli_daemon_call(c, "restore", cl, &st, CKPTD_MSG_STATUS_REPLY, &srep)))
		return rc;
	snprintf(p->node, sizeof(p->node), "%s", srep.u.status_reply.node);
	ckptd_msg_free(&srep);
	if (c->rank >= 0 && (uint64_t)c->rank >= p->world)
		return cli_usage("restore", "rank %lld not below world size %u", (long long)c->rank, p->world);
	return EXIT_OK;
}

static void say_failed(uint32_t r, const char *what, const char *why, int err, const char *then)
{
	fprintf(stderr, "ckpt restore: rank %u: %s: %s%s\n", r, what,
	        cli_text(why[0] ? why : ckpt_strerror(err), (char[2100]){ 0 }, 2100), then);
}

/* Rank r from the first of its copies here that restores whole, in the
 * library's order, into dir (opened as *dfd; emptied before each try after
 * a failed one). 0, or the last error; *tried_shared: the SHARED tree held
 * something of it. */
static int restore_tiers(cli *c, ckptd_client *cl, const char *shared_dir, const rplan *p, uint32_t r,
                         const ckptd_location *loc, const cli_copy *cp, size_t ncp, const char *dir, int *dfd,
                         rtally *t, int *tried_shared)
{
	char why[700] = "";
	int err = -ENOENT;
	*tried_shared = 0;
	if (loc->tiers & CKPT_TIER_LOCAL_MEM) {
		if ((err = restore_dram(c, cl, p->v, r, CKPTD_SEG_READ, *dfd, why, sizeof(why))) == 0) {
			t->mem++;
			return 0;
		}
		say_failed(r, "DRAM copy", why, err, loc->tiers & CKPT_TIER_LOCAL_DISK ? "; reading the disk copy" : "");
	}
	if (loc->tiers & CKPT_TIER_LOCAL_DISK) {
		/* The recorded checksum is the shard's DRAM image's, which a
		 * compressed file does not repeat: header and chunks are checked. */
		char path[4096], what[4200];
		ckpt__shard_path(path, sizeof(path), loc->root, c->job, p->v, r);
		cli_shard_src src = { .path = path };
		restage(dir, dfd);
		why[0] = 0;
		if ((err = *dfd < 0 ? -errno : cli_restore_shard(c, &src, p->v, r, *dfd, why, sizeof(why))) == 0) {
			t->disk++;
			return 0;
		}
		snprintf(what, sizeof(what), "disk copy %s", path);
		say_failed(r, what, why, err, "");
	}
	/* Then what the library reads after the node's own copies: a partner's
	 * copy held here (this node was the lost node's partner), then the
	 * SHARED tree. */
	if (loc->tiers & CKPT_TIER_PEER_MEM) {
		restage(dir, dfd);
		why[0] = 0;
		err = *dfd < 0 ? -errno : restore_dram(c, cl, p->v, r, CKPTD_SEG_PARTNER_COPY, *dfd, why, sizeof(why));
		if (err == 0) {
			t->peer++;
			return 0;
		}
		say_failed(r, "partner copy", why, err, "");
	}
	if (shared_dir) {
		restage(dir, dfd);
		why[0] = 0;
		err = *dfd < 0 ? -errno : restore_shared(c, shared_dir, p->v, r, cp, ncp, *dfd, why, sizeof(why));
		*tried_shared = err != -ENOENT;
		if (err == 0) {
			t->shared++;
			return 0;
		}
		say_failed(r, "SHARED copy", why, err, "");
	}
	return err;
}

/* Rank r into its directory of stage: EXIT_OK (restored, or counted in t
 * as missing or corrupt), or the exit code of a failure that ends it all.
 * cp, ncp: the rank's own copies. */
static int restore_rank(cli *c, ckptd_client *cl, const char *shared_dir, const rplan *p, uint32_t r,
                        const cli_copy *cp, size_t ncp, const char *stage, rtally *t)
{
	char dir[4300];
	snprintf(dir, sizeof(dir), p->world > 1 && c->rank < 0 ? "%s/rank-%u" : "%s", stage, r);
	ckptd_location loc;
	int dfd = -1, rc = 0, tried_shared;
	if (ckpt__mkdir_p(dir, 0700) < 0 || (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (rc = locate(c, cl, p->v, r, &loc))) {
		if (dfd >= 0)
			close(dfd);
		return rc ? rc : EXIT_ERROR;
	}
	int err = restore_tiers(c, cl, shared_dir, p, r, &loc, cp, ncp, dir, &dfd, t, &tried_shared);
	if (dfd >= 0)
		close(dfd);
	if (err < 0 && !loc.tiers && !tried_shared) {
		t->missing++;
		char nodes[256] = "";
		size_t k = 0;
		for (size_t i = 0; i < ncp; i++)
			if (cp[i].live && !strstr(nodes, cp[i].node))
				k += (size_t)snprintf(nodes + k, k < sizeof(nodes) ? sizeof(nodes) - k : 0, "%s%s",
				                      k ? ", " : "", cp[i].node);
		fprintf(stderr, "ckpt restore: rank %u has no copy on this node (%s); it is held on: %s\n", r, p->node,
		        nodes[0] ? nodes : "no node");
	} else if (err < 0) {
		t->corrupt++;
	}
	return EXIT_OK;
}

static void restore_report(const cli *c, const rplan *p, const char *out, const rtally *t)
{
	if (c->json) {
		printf("{\"job\": \"%s\", \"version\": %llu, \"from_local_mem\": %u, \"from_local_disk\": %u, "
		       "\"from_peer_mem\": %u, \"from_shared\": %u, \"out\": ", c->job, (unsigned long long)p->v, t->mem,
		       t->disk, t->peer, t->shared);
		cli_json_str(stdout, out);
		printf("}\n");
	} else {
		printf("restored job %s version %llu into %s (%u ranks from this node's DRAM, %u from its disk, %u from "
		       "partner copies held here, %u from SHARED)\n", c->job, (unsigned long long)p->v, out, t->mem, t->disk,
		       t->peer, t->shared);
	}
}

int cli_restore_daemon(cli *c, const char *out, const char *shared_dir)
{
	if (ckpt__job_valid(c->job) < 0)
		return cli_usage("restore", "a valid --job is required");
	if (strncmp(c->daemon, "unix:", 5) != 0)
		return cli_usage("restore", "--daemon: restore reads this node's copies; give its agent's Unix socket "
		                            "(unix:/path), not %s", c->daemon);
	ckptd_client *cl = NULL;
	int rc;
	if (shared_dir && ckpt__s3tree_is_url(shared_dir) && (rc = cli_s3_open(c, shared_dir, "restore")))
		return rc;
	if ((rc = cli_daemon_connect(c, "restore", c->job, &cl))) {
		cli_s3_close(c);
		return rc;
	}
	rplan p = { 0 };
	rtally t = { 0 };
	char stage[4200] = "", why[700] = "";
	if ((rc = restore_plan(c, cl, shared_dir, &p)))
		goto out;
	int err = cli_stage_make(out, stage, sizeof(stage), why, sizeof(why));
	if (err < 0) {
		fprintf(stderr, "ckpt restore: %s\n", why);
		rc = EXIT_ERROR;
		goto out;
	}
	/* --rank: that rank alone; else every rank (as many as were listed). */
	uint32_t r0 = c->rank >= 0 ? (uint32_t)c->rank : 0;
	uint64_t rend = c->rank >= 0 ? r0 + 1ull : p.world;
	size_t lo = 0;
	for (uint32_t r = r0; r < rend; r++) {
		while (lo < p.n && p.cp[lo].rank < r) /* this rank's copies: cp[lo, hi) */
			lo++;
		size_t hi = lo;
		while (hi < p.n && p.cp[hi].rank == r)
			hi++;
		if ((rc = restore_rank(c, cl, shared_dir, &p, r, p.cp + lo, hi - lo, stage, &t)))
			goto out;
	}
	if (t.missing || t.corrupt) {
		fprintf(stderr, "ckpt restore: version %llu not restored: %u ranks not on this node, %u without an intact copy "
		                "here (restore those ranks on the nodes that hold them, with --rank, or from SHARED with "
		                "--shared-dir)\n",
		        (unsigned long long)p.v, t.missing, t.corrupt);
		rc = t.corrupt ? EXIT_CORRUPT : EXIT_NOTFOUND;
		goto out;
	}
	if ((err = cli_publish_dir(stage, out, why, sizeof(why))) < 0) {
		fprintf(stderr, "ckpt restore: %s\n", cli_text(why[0] ? why : ckpt_strerror(err), (char[2100]){ 0 }, 2100));
		rc = EXIT_ERROR;
		goto out;
	}
	restore_report(c, &p, out, &t);
	rc = EXIT_OK;
out:
	if (stage[0])
		cli_remove_stage(stage);
	free(p.cp);
	ckptd_client_close(cl);
	cli_s3_close(c);
	return rc;
}
