/* S3's XML answers, parsed by expat: errors, ListObjectsV2,
 * ListMultipartUploads, DeleteObjects' result and single fields. Bounded
 * work and memory: the caller caps the answer's size, a field's text is
 * at most S3_XML_VAL bytes, nesting at most 16 deep, and a document with
 * any entity declaration (a DTD's) is refused outright.
 * tests/fuzz/fuzz_s3_xml.c fuzzes them. */
#include "s3_int.h"

#include <errno.h>
#include <expat.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 16

/* What one parse collects: fields of the root (depth 2) and of records
 * (depth 3 under a depth-2 element named rec[i]). */
typedef struct xspec {
	const char *root;
	const char *top[6];
	const char *rec[2];
	const char *fields[2][3];
} xspec;

typedef struct xstate {
	XML_Parser p;
	const xspec *spec;
	int depth;
	char names[4][64];   /* the open elements' names, the first four levels */
	char text[S3_XML_VAL];
	size_t tlen;
	int collecting;
	char top[6][S3_XML_VAL];
	int rec_kind;        /* -1 none */
	char fields[3][S3_XML_VAL];
	s3_xml_rec_fn fn;
	void *arg;
	int kind;
	int cb_rc;
	uint64_t records;
	const char *why;     /* a failure of ours (not expat's) */
} xstate;

static void stop(xstate *x, const char *why)
{
	if (!x->why)
		x->why = why;
	XML_StopParser(x->p, XML_FALSE);
}

static int wanted(const xstate *x)
{
	const xspec *s = x->spec;
	if (x->depth == 2) {
		for (int i = 0; i < 6 && s->top[i]; i++)
			if (!strcmp(x->names[1], s->top[i]))
				return 1;
	}
	if (x->depth == 3 && x->rec_kind >= 0) {
		for (int i = 0; i < 3 && s->fields[x->rec_kind][i]; i++)
			if (!strcmp(x->names[2], s->fields[x->rec_kind][i]))
				return 1;
	}
	return 0;
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	(void)attrs;
	xstate *x = ud;
	if (++x->depth > MAX_DEPTH)
		return stop(x, "nested too deep");
	if (x->depth <= 4)
		snprintf(x->names[x->depth - 1], sizeof(x->names[0]), "%s", name);
	if (x->depth == 1 && x->spec->root && strcmp(name, x->spec->root))
		return stop(x, "not the expected answer");
	if (x->depth == 2) {
		x->rec_kind = -1;
		for (int i = 0; i < 2 && x->spec->rec[i]; i++)
			if (!strcmp(name, x->spec->rec[i])) {
				x->rec_kind = i;
				memset(x->fields, 0, sizeof(x->fields));
			}
	}
	x->collecting = wanted(x);
	x->tlen = 0;
	x->text[0] = 0;
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	xstate *x = ud;
	if (!x->collecting || len <= 0)
		return;
	if (x->tlen + (size_t)len >= sizeof(x->text))
		return stop(x, "a field is too long");
	memcpy(x->text + x->tlen, s, (size_t)len);
	x->tlen += (size_t)len;
	x->text[x->tlen] = 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		uint64_t d = (uint64_t)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static void record_done(xstate *x)
{
	x->records++;
	if (!x->fn || x->cb_rc)
		return;
	uint64_t size = 0;
	const char *key = x->fields[0], *extra = "";
	switch (x->kind) {
	case S3_LIST_OBJECTS:
		if (x->rec_kind == 0 && parse_u64(x->fields[1], &size) < 0)
			return stop(x, "an object's Size is not a number");
		break;
	case S3_LIST_UPLOADS:
	case S3_DELETE_RESULT:
		extra = x->fields[1];
		break;
	}
	if (x->kind == S3_DELETE_RESULT && x->rec_kind != 0)
		return; /* <Deleted>: only errors are reported */
	int rc = x->fn(x->arg, key, size, extra);
	if (rc) {
		x->cb_rc = rc;
		XML_StopParser(x->p, XML_FALSE);
	}
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	(void)name;
	xstate *x = ud;
	if (x->collecting) {
		if (x->depth == 2) {
			for (int i = 0; i < 6 && x->spec->top[i]; i++)
				if (!strcmp(x->names[1], x->spec->top[i]))
					memcpy(x->top[i], x->text, x->tlen + 1);
		} else if (x->depth == 3 && x->rec_kind >= 0) {
			for (int i = 0; i < 3 && x->spec->fields[x->rec_kind][i]; i++)
				if (!strcmp(x->names[2], x->spec->fields[x->rec_kind][i]))
					memcpy(x->fields[i], x->text, x->tlen + 1);
		}
		x->collecting = 0;
	}
	if (x->depth == 2 && x->rec_kind >= 0) {
		record_done(x);
		x->rec_kind = -1;
	}
	x->depth--;
}

static void XMLCALL on_entity(void *ud, const XML_Char *name, int pe, const XML_Char *v, int vlen,
                              const XML_Char *base, const XML_Char *sys, const XML_Char *pub, const XML_Char *nota)
{
	(void)name, (void)pe, (void)v, (void)vlen, (void)base, (void)sys, (void)pub, (void)nota;
	stop(ud, "it declares entities");
}

/* 0, a callback's non-zero, or -EIO (why set). */
static int run(xstate *x, const char *xml, size_t n)
{
	if (n > (size_t)INT32_MAX) {
		x->why = "too large";
		return -EIO;
	}
	x->p = XML_ParserCreate("UTF-8");
	if (!x->p) {
		x->why = "out of memory";
		return -ENOMEM;
	}
	x->rec_kind = -1;
	XML_SetUserData(x->p, x);
	XML_SetElementHandler(x->p, on_start, on_end);
	XML_SetCharacterDataHandler(x->p, on_text);
	XML_SetEntityDeclHandler(x->p, on_entity);
	enum XML_Status st = XML_Parse(x->p, xml, (int)n, XML_TRUE);
	int rc = 0;
	if (x->cb_rc)
		rc = x->cb_rc;
	else if (st != XML_STATUS_OK || x->why) {
		if (!x->why)
			x->why = XML_ErrorString(XML_GetErrorCode(x->p));
		rc = -EIO;
	}
	XML_ParserFree(x->p);
	return rc;
}

int s3__xml_error(const char *xml, size_t n, s3_xml_err *e)
{
	static const xspec spec = { "Error", { "Code", "Message", "ServerTime", "RequestTime", "Region" } };
	memset(e, 0, sizeof(*e));
	if (!xml || !n)
		return -1;
	xstate *x = calloc(1, sizeof(*x));
	if (!x)
		return -1;
	x->spec = &spec;
	int rc = run(x, xml, n);
	if (rc == 0 && x->top[0][0]) {
		snprintf(e->code, sizeof(e->code), "%.*s", (int)sizeof(e->code) - 1, x->top[0]);
		snprintf(e->message, sizeof(e->message), "%.*s", (int)sizeof(e->message) - 1, x->top[1]);
		snprintf(e->server_time, sizeof(e->server_time), "%.*s", (int)sizeof(e->server_time) - 1, x->top[2]);
		snprintf(e->request_time, sizeof(e->request_time), "%.*s", (int)sizeof(e->request_time) - 1, x->top[3]);
		snprintf(e->region, sizeof(e->region), "%.*s", (int)sizeof(e->region) - 1, x->top[4]);
	} else
		rc = -1;
	free(x);
	return rc;
}

int s3__xml_list(const char *xml, size_t n, int kind, s3_xml_rec_fn fn, void *arg, s3_xml_page *page, char *err,
                 size_t errcap)
{
	static const xspec specs[] = {
		[S3_LIST_OBJECTS] = { "ListBucketResult", { "IsTruncated", "NextContinuationToken" },
		                      { "Contents", "CommonPrefixes" }, { { "Key", "Size" }, { "Prefix" } } },
		[S3_LIST_UPLOADS] = { "ListMultipartUploadsResult", { "IsTruncated", "NextKeyMarker", "NextUploadIdMarker" },
		                      { "Upload" }, { { "Key", "UploadId" } } },
		[S3_DELETE_RESULT] = { "DeleteResult", { NULL }, { "Error", "Deleted" }, { { "Key", "Code" }, { "Key" } } },
	};
	if (kind < 0 || kind > S3_DELETE_RESULT)
		return -EINVAL;
	memset(page, 0, sizeof(*page));
	xstate *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->spec = &specs[kind];
	x->kind = kind;
	x->fn = fn;
	x->arg = arg;
	int rc = run(x, xml ? xml : "", xml ? n : 0);
	if (rc == -EIO || rc == -ENOMEM)
		s3__errf(err, errcap, "a malformed %s answer: %s", x->spec->root, x->why ? x->why : "?");
	if (rc == 0) {
		page->truncated = !strcmp(x->top[0], "true");
		memcpy(page->next, x->top[1], sizeof(page->next));
		memcpy(page->next_upload, x->top[2], sizeof(page->next_upload));
		page->records = x->records;
		if (page->truncated && kind != S3_DELETE_RESULT && !page->next[0]) {
			s3__errf(err, errcap, "a truncated %s answer without its next marker", x->spec->root);
			rc = -EIO;
		}
	}
	free(x);
	return rc;
}

int s3__xml_field(const char *xml, size_t n, const char *root, const char *field, char *out, size_t cap)
{
	xspec spec = { root, { field } };
	xstate *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->spec = &spec;
	int rc = run(x, xml ? xml : "", xml ? n : 0);
	if (rc == 0 && (!x->top[0][0] || strlen(x->top[0]) >= cap))
		rc = -EIO;
	if (rc == 0)
		snprintf(out, cap, "%s", x->top[0]);
	free(x);
	return rc;
}
