/* safetensors headers (safetensors.h), parsed and built with jansson. */
#include "safetensors.h"
#include "base/common.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const struct {
	const char *name;
	ckpt_dtype dt;
} st_types[] = {
	{ "BOOL", CKPT_DTYPE_BOOL }, { "U8", CKPT_DTYPE_U8 },     { "I8", CKPT_DTYPE_I8 },
	{ "I16", CKPT_DTYPE_I16 },   { "U16", CKPT_DTYPE_U16 },   { "F16", CKPT_DTYPE_F16 },
	{ "BF16", CKPT_DTYPE_BF16 }, { "I32", CKPT_DTYPE_I32 },   { "U32", CKPT_DTYPE_U32 },
	{ "F32", CKPT_DTYPE_F32 },   { "F64", CKPT_DTYPE_F64 },   { "I64", CKPT_DTYPE_I64 },
	{ "U64", CKPT_DTYPE_U64 },   { "F8_E4M3", CKPT_DTYPE_F8E4M3 }, { "F8_E5M2", CKPT_DTYPE_F8E5M2 },
};

const char *st_dtype_name(ckpt_dtype dtype)
{
	for (size_t i = 0; i < sizeof(st_types) / sizeof(st_types[0]); i++)
		if (st_types[i].dt == dtype)
			return st_types[i].name;
	return "U8"; /* bytes */
}

int st_dtype_parse(const char *s, ckpt_dtype *out)
{
	for (size_t i = 0; i < sizeof(st_types) / sizeof(st_types[0]); i++)
		if (!strcmp(st_types[i].name, s)) {
			*out = st_types[i].dt;
			return 0;
		}
	return -1;
}

static int fail(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t cap, const char *fmt, ...)
{
	if (why && cap) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, cap, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int st_header_len(const uint8_t *buf, size_t len, uint64_t file_size, uint64_t *hlen, char *why, size_t cap)
{
	if (len < 8 || file_size < 8)
		return fail(why, cap, "shorter than the 8-byte header length");
	uint64_t n = ckpt__get_le64(buf);
	if (n == 0 || n > ST_MAX_HEADER)
		return fail(why, cap, "header length %llu is not in 1..%u", (unsigned long long)n, ST_MAX_HEADER);
	if (n > file_size - 8)
		return fail(why, cap, "header length %llu runs past the end of the file (%llu bytes)",
		            (unsigned long long)n, (unsigned long long)file_size);
	*hlen = n;
	return 0;
}

void st_file_free(st_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		free(f->t[i].name);
	free(f->t);
	f->t = NULL;
	f->n = 0;
}

static int get_u64(json_t *j, uint64_t *out)
{
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(j);
	return 0;
}

/* One "name": {...} entry. */
static int parse_entry(const char *name, json_t *e, uint64_t data_len, st_tensor *t, char *why, size_t cap)
{
	memset(t, 0, sizeof(*t));
	size_t nl = strlen(name);
	if (ckpt__region_name_valid(name, nl) < 0)
		return fail(why, cap, "tensor name '%.64s' cannot be a region name (1..255 bytes, no '/')", name);
	if (!json_is_object(e))
		return fail(why, cap, "tensor '%s': not an object", name);
	json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
	       *off = json_object_get(e, "data_offsets");
	if (!json_is_string(dt) || st_dtype_parse(json_string_value(dt), &t->dtype) < 0)
		return fail(why, cap, "tensor '%s': dtype %s is not one this tool knows", name,
		            json_is_string(dt) ? json_string_value(dt) : "(missing)");
	if (!json_is_array(sh) || json_array_size(sh) > CKPT_MAX_DIMS)
		return fail(why, cap, "tensor '%s': shape is not an array of at most %d sizes", name, CKPT_MAX_DIMS);
	if (!json_is_array(off) || json_array_size(off) != 2 || get_u64(json_array_get(off, 0), &t->begin) < 0 ||
	    get_u64(json_array_get(off, 1), &t->end) < 0)
		return fail(why, cap, "tensor '%s': data_offsets is not [begin, end]", name);
	t->ndim = (uint32_t)json_array_size(sh);
	uint64_t bytes = ckpt_dtype_size(t->dtype);
	for (uint32_t d = 0; d < t->ndim; d++) {
		if (get_u64(json_array_get(sh, d), &t->shape[d]) < 0)
			return fail(why, cap, "tensor '%s': shape[%u] is not a size", name, d);
		if (__builtin_mul_overflow(bytes, t->shape[d], &bytes))
			return fail(why, cap, "tensor '%s': shape too large", name);
	}
	if (t->begin > t->end || t->end > data_len)
		return fail(why, cap, "tensor '%s': data_offsets [%llu, %llu] past the end of the data (%llu bytes)", name,
		            (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)data_len);
	if (t->end - t->begin != bytes)
		return fail(why, cap, "tensor '%s': data_offsets hold %llu bytes, its shape %llu", name,
		            (unsigned long long)(t->end - t->begin), (unsigned long long)bytes);
	if (!(t->name = strdup(name)))
		return fail(why, cap, "out of memory");
	return 0;
}

static int cmp_begin(const void *a, const void *b)
{
	const st_tensor *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

int st_header_parse(const char *js, size_t hlen, uint64_t file_size, st_file *out, char *why, size_t cap)
{
	memset(out, 0, sizeof(*out));
	if (hlen == 0 || hlen > ST_MAX_HEADER || file_size < 8 || hlen > file_size - 8)
		return fail(why, cap, "header length %zu does not fit the file", hlen);
	out->header_len = hlen;
	out->data_start = 8 + hlen;
	out->data_len = file_size - out->data_start;
	json_error_t je;
	json_t *root = json_loadb(js, hlen, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return fail(why, cap, "header is not JSON: %s (at byte %d)", je.text, je.position);
	int err = 0;
	if (!json_is_object(root)) {
		err = fail(why, cap, "header is not a JSON object");
		goto out;
	}
	size_t n = json_object_size(root);
	out->t = calloc(n + 1, sizeof(*out->t));
	if (!out->t) {
		err = fail(why, cap, "out of memory");
		goto out;
	}
	const char *key;
	json_t *val;
	json_object_foreach(root, key, val) {
		if (!strcmp(key, "__metadata__")) {
			const char *mk;
			json_t *mv;
			if (!json_is_object(val)) {
				err = fail(why, cap, "__metadata__ is not an object");
				goto out;
			}
			json_object_foreach(val, mk, mv) if (!json_is_string(mv)) {
				err = fail(why, cap, "__metadata__ '%.64s' is not a string", mk);
				goto out;
			}
			continue;
		}
		if ((err = parse_entry(key, val, out->data_len, &out->t[out->n], why, cap)) < 0)
			goto out;
		out->n++;
	}
	qsort(out->t, out->n, sizeof(*out->t), cmp_begin);
	uint64_t at = 0;
	for (size_t i = 0; i < out->n; i++) {
		const st_tensor *t = &out->t[i];
		if (t->begin < at) {
			err = fail(why, cap, "tensors '%s' and '%s' overlap in the data", out->t[i - 1].name, t->name);
			goto out;
		}
		if (t->begin > at) {
			err = fail(why, cap, "data bytes %llu..%llu belong to no tensor", (unsigned long long)at,
			           (unsigned long long)t->begin);
			goto out;
		}
		at = t->end;
	}
	if (at != out->data_len)
		err = fail(why, cap, "data bytes %llu..%llu belong to no tensor", (unsigned long long)at,
		           (unsigned long long)out->data_len);
out:
	json_decref(root);
	if (err < 0)
		st_file_free(out);
	return err;
}

uint8_t *st_header_build(const st_tensor *t, size_t n, const char *const *meta, size_t nmeta, size_t *len)
{
	json_t *root = json_object(), *md = json_object();
	uint8_t *buf = NULL;
	char *js = NULL;
	if (!root || !md)
		goto out;
	for (size_t i = 0; i < nmeta; i++)
		json_object_set_new(md, meta[2 * i], json_string(meta[2 * i + 1]));
	if (nmeta)
		json_object_set(root, "__metadata__", md);
	uint64_t at = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_object(), *sh = json_array(), *off = json_array();
		uint64_t bytes = ckpt_dtype_size(t[i].dtype);
		for (uint32_t d = 0; d < t[i].ndim; d++) {
			json_array_append_new(sh, json_integer((json_int_t)t[i].shape[d]));
			bytes *= t[i].shape[d];
		}
		json_array_append_new(off, json_integer((json_int_t)at));
		json_array_append_new(off, json_integer((json_int_t)(at + bytes)));
		at += bytes;
		json_object_set_new(e, "dtype", json_string(st_dtype_name(t[i].dtype)));
		json_object_set_new(e, "shape", sh);
		json_object_set_new(e, "data_offsets", off);
		if (json_object_set_new(root, t[i].name, e) < 0)
			goto out;
	}
	if (!(js = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER)))
		goto out;
	size_t jl = strlen(js), hl = CKPT_ALIGN_UP(jl, 8);
	if (!(buf = malloc(8 + hl)))
		goto out;
	ckpt__put_le64(buf, hl);
	memcpy(buf + 8, js, jl);
	memset(buf + 8 + jl, ' ', hl - jl);
	*len = 8 + hl;
out:
	free(js);
	json_decref(md);
	json_decref(root);
	return buf;
}
