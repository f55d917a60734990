/* golden_gen DIR: writes the input file of every golden region to
 * DIR/v<version>/r<rank>/<name>, from golden_data.h. Used by make-golden.sh,
 * and by test_golden to check restored files. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "golden_data.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: golden_gen DIR\n");
		return 2;
	}
	if (mkdir(argv[1], 0755) < 0 && errno != EEXIST) {
		perror(argv[1]);
		return 1;
	}
	for (size_t i = 0; i < GOLDEN_NREGIONS; i++) {
		const golden_region *g = &golden_regions[i];
		char path[4096];
		snprintf(path, sizeof(path), "%s/v%llu", argv[1], (unsigned long long)g->version);
		mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/v%llu/r%u", argv[1], (unsigned long long)g->version, g->rank);
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			perror(path);
			return 1;
		}
		snprintf(path, sizeof(path), "%s/v%llu/r%u/%s", argv[1], (unsigned long long)g->version,
		         g->rank, g->name);
		uint8_t *buf = malloc(g->bytes + 1);
		FILE *f = fopen(path, "wb");
		if (!buf || !f) {
			perror(path);
			return 1;
		}
		golden_fill(g, buf);
		if (fwrite(buf, 1, g->bytes, f) != g->bytes || fclose(f) != 0) {
			perror(path);
			return 1;
		}
		free(buf);
	}
	return 0;
}
