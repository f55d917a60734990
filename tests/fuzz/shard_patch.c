/* ckpt_shard_patch: rewrites the footer of a valid shard file with one field
 * made hostile, re-encoded by the library's own encoder so that every
 * checksum is right and only that field is wrong. Test tool only.
 *
 *   ckpt_shard_patch rename-region FILE OLD NEW   region OLD is named NEW
 *   ckpt_shard_patch region-bytes FILE NAME N     region NAME claims N bytes
 *                                                 (data_bytes follows)
 *   ckpt_shard_patch world-size FILE N            the header claims N ranks
 * Exit 0 done, 1 error, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "format/format.h"
#include "helpers.h"

static int usage(void)
{
	fprintf(stderr, "usage: ckpt_shard_patch rename-region FILE OLD NEW\n"
	                "       ckpt_shard_patch region-bytes FILE NAME BYTES\n"
	                "       ckpt_shard_patch world-size FILE N\n");
	return 2;
}

int main(int argc, char **argv)
{
	int do_world = argc == 4 && !strcmp(argv[1], "world-size");
	if (argc != 5 && !do_world)
		return usage();
	const char *cmd = argv[1], *path = argv[2], *name = do_world ? NULL : argv[3], *arg = argv[argc - 1];
	int do_rename = !strcmp(cmd, "rename-region");
	if (!do_rename && !do_world && strcmp(cmd, "region-bytes"))
		return usage();
	size_t len;
	uint8_t *buf = (uint8_t *)t_slurp(path, &len);
	if (!buf) {
		fprintf(stderr, "ckpt_shard_patch: cannot read %s\n", path);
		return 1;
	}
	ckpt_shard s;
	char why[256] = "";
	if (ckpt__shard_parse_mem(buf, len, &s, why, sizeof(why)) < 0) {
		fprintf(stderr, "ckpt_shard_patch: %s: %s\n", path, why);
		return 1;
	}
	uint64_t fo = s.tail.footer_offset, hsum = s.tail.header_checksum;
	if (do_world) {
		char *end;
		errno = 0;
		unsigned long long w = strtoull(arg, &end, 0);
		if (errno || *end || w == 0 || w > UINT32_MAX)
			return usage();
		s.header.world_size = (uint32_t)w;
		hsum = ckpt__fmt_header_encode(buf, &s.header);
		name = s.footer.regions[0].name; /* the footer is re-encoded as it was */
	}
	int ri = ckpt__shard_find_region(&s, name);
	if (ri < 0) {
		fprintf(stderr, "ckpt_shard_patch: %s has no region '%s'\n", path, name);
		return 1;
	}
	ckpt_fmt_footer *f = &s.footer;
	ckpt_fmt_region *r = &f->regions[ri];
	if (do_rename) {
		size_t n = strlen(arg);
		if (n == 0 || n > CKPT_MAX_NAME)
			return usage();
		memcpy(r->name, arg, n + 1);
		r->name_len = (uint16_t)n;
	} else if (!do_world) {
		char *end;
		errno = 0;
		uint64_t want = strtoull(arg, &end, 0);
		if (errno || *end)
			return usage();
		/* Wrapping on purpose: a hostile writer is not bound by overflow. */
		f->data_bytes = f->data_bytes - r->bytes + want;
		r->bytes = want;
	}
	size_t tl = ckpt__fmt_trailer_len(f);
	uint8_t *out = calloc(1, fo + tl);
	if (!out)
		return 1;
	memcpy(out, buf, fo);
	ckpt__fmt_trailer_encode(out + fo, tl, f, fo, hsum);
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.patch-tmp", path);
	FILE *o = fopen(tmp, "wb");
	int ok = o && fwrite(out, 1, fo + tl, o) == fo + tl;
	if (o && fclose(o) != 0)
		ok = 0;
	if (!ok || rename(tmp, path) < 0) {
		fprintf(stderr, "ckpt_shard_patch: cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	ckpt__shard_close(&s);
	free(out);
	free(buf);
	return 0;
}
