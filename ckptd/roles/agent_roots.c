/* Which checkpoint roots the agent acts on. A rank names its root in
 * REGISTER_RANK, and the agent, running as root, later deletes files under
 * it (retention, DELETE_VERSION), reads shard files from it (verify, the
 * SHARED flush) and hands its path to the CLI. So a root is taken only when
 * the agent has a reason to trust it: it is a real directory (recorded by
 * its canonical path, no symlink in it), owned by the uid the Unix socket
 * reports for the rank (SO_PEERCRED; root's ranks may name any), and, when
 * --rank-roots is set, inside one of those directories. Over TCP there is
 * no uid to check: roots are taken only under --rank-roots; without it the
 * rank is served but its root is not recorded (the agent acts on nothing
 * there). */
#include "agent_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Whether canon lies at or below one of the --rank-roots directories. */
static int under_allowed(const char *list, const char *canon)
{
	char item[CKPTD_PATH_MAX + 1];
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ':');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n && n < sizeof(item)) {
			memcpy(item, p, n);
			item[n] = '\0';
			char *rp = realpath(item, NULL);
			if (rp) {
				size_t k = strlen(rp);
				int in = !strcmp(rp, "/") || (!strncmp(canon, rp, k) && (canon[k] == '/' || canon[k] == '\0'));
				free(rp);
				if (in)
					return 1;
			}
		}
		p += n + (e ? 1 : 0);
	}
	return 0;
}

int ckptd__agent_root_trust(const ckptd_agent *a, const ckptd_session *s, const char *root, char *canon,
                            size_t cap, char *why, size_t whycap)
{
	const char *allowed = a->cfg->rank_roots;
	if (root[0] != '/') {
		snprintf(why, whycap, "checkpoint root must be an absolute path");
		return -EINVAL;
	}
	char *rp = realpath(root, NULL);
	struct stat st;
	if (!rp || stat(rp, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(why, whycap, "checkpoint root %.200s is not a directory", root);
		free(rp);
		return -ENOTDIR;
	}
	int r = 0;
	uid_t uid;
	int have_uid = ckptd_session_peer_cred(s, NULL, &uid, NULL) == 0;
	if (strlen(rp) >= cap || strlen(rp) > CKPTD_PATH_MAX) {
		snprintf(why, whycap, "checkpoint root path too long");
		r = -ENAMETOOLONG;
	} else if (allowed && !under_allowed(allowed, rp)) {
		snprintf(why, whycap, "checkpoint root %.200s is outside the agent's --rank-roots", rp);
		r = -EACCES;
	} else if (!have_uid && !allowed) {
		snprintf(why, whycap, "a rank over TCP cannot prove who owns its checkpoint root %.200s; the agent "
		                      "records such roots only under --rank-roots", rp);
		r = -EPERM;
	} else if (have_uid && uid != 0 && st.st_uid != uid) {
		snprintf(why, whycap, "checkpoint root %.200s is owned by uid %u, not by the rank's uid %u", rp,
		         (unsigned)st.st_uid, (unsigned)uid);
		r = -EACCES;
	}
	if (r == 0)
		snprintf(canon, cap, "%s", rp);
	free(rp);
	return r;
}

int ckptd__agent_root_still_ok(const ckptd_agent *a, const char *root, char *why, size_t whycap)
{
	char *rp = realpath(root, NULL);
	int r = 0;
	if (!rp) {
		r = -errno;
		snprintf(why, whycap, "%s", strerror(errno));
	} else if (strcmp(rp, root)) {
		/* A symlink was put in its path since the rank registered it. */
		snprintf(why, whycap, "it now resolves to %.200s", rp);
		r = -ELOOP;
	} else if (a->cfg->rank_roots && !under_allowed(a->cfg->rank_roots, rp)) {
		snprintf(why, whycap, "it is outside --rank-roots");
		r = -EACCES;
	}
	free(rp);
	return r;
}

int ckptd__agent_roots_check_config(const ckptd_config *cfg, char *err, size_t errcap)
{
	const char *list = cfg->rank_roots;
	for (const char *p = list ? list : ""; *p;) {
		const char *e = strchr(p, ':');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (!n || p[0] != '/' || n > CKPTD_PATH_MAX) {
			snprintf(err, errcap, "--rank-roots: '%.*s' is not an absolute directory path (a list is "
			         "separated by ':')", (int)(n > 200 ? 200 : n), p);
			return -EINVAL;
		}
		p += n + (e ? 1 : 0);
	}
	return 0;
}
