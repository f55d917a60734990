/* The public names of things: error texts, the library's version, dtypes,
 * version states. No state; safe from any thread. */
#include "common.h"

#include <string.h>

static const char *const own_errors[] = {
	[CKPT_ECORRUPT - CKPT_ERRNO_OFFSET] = "checkpoint data is corrupt (checksum or structure check failed)",
	[CKPT_EFORMAT - CKPT_ERRNO_OFFSET] = "format or schema version not supported by this build",
	[CKPT_ENOVERSION - CKPT_ERRNO_OFFSET] = "no such version, or no restorable version",
	[CKPT_ESKIPPED - CKPT_ERRNO_OFFSET] = "save skipped: staging pool busy",
	[CKPT_EMISMATCH - CKPT_ERRNO_OFFSET] = "checkpoint does not match the registered regions or job",
	[CKPT_ECONFIG - CKPT_ERRNO_OFFSET] = "invalid configuration",
	[CKPT_EINDEX - CKPT_ERRNO_OFFSET] = "index (LMDB) error",
	[CKPT_ENAME - CKPT_ERRNO_OFFSET] = "invalid job id or region name",
	[CKPT_ETOOBIG - CKPT_ERRNO_OFFSET] = "save larger than the staging pool",
	[CKPT_ESTATE - CKPT_ERRNO_OFFSET] = "operation not valid in the current state",
	[CKPT_EFAULT_INJECTED - CKPT_ERRNO_OFFSET] = "injected fault (test)",
	[CKPT_EDEVICE - CKPT_ERRNO_OFFSET] = "CUDA call failed",
	[CKPT_ECONTRACT - CKPT_ERRNO_OFFSET] =
		"device state changed before ckpt_fence, or corrupted between device and host",
	[CKPT_EUNAVAIL - CKPT_ERRNO_OFFSET] =
		"storage tier not available: no ckptd agent reachable, or DRAM segments need its Unix socket",
	[CKPT_EUNREACHABLE - CKPT_ERRNO_OFFSET] =
		"a committed checkpoint exists but none of its copies could be reached (see the log for where they are); "
		"do not start from scratch",
	[CKPT_ECHANGED - CKPT_ERRNO_OFFSET] = "a file changed, or was shorter than its region, while a save read it",
};
/* Every code has its text: a new code without one fails to compile. */
_Static_assert(sizeof(own_errors) / sizeof(own_errors[0]) == CKPT_ELAST - CKPT_ERRNO_OFFSET,
               "ckpt_strerror: a CKPT_E* code has no message");

const char *ckpt_strerror(int err)
{
	if (err < 0)
		err = -err;
	if (err == 0)
		return "success";
	if (err > CKPT_ERRNO_OFFSET && err < CKPT_ELAST && own_errors[err - CKPT_ERRNO_OFFSET])
		return own_errors[err - CKPT_ERRNO_OFFSET];
	if (err < CKPT_ERRNO_OFFSET) {
		/* strerrordesc_np is thread-safe and static (glibc >= 2.32). */
		const char *s = strerrordesc_np(err);
		if (s)
			return s;
	}
	return "unknown error";
}

const char *ckpt_version(void)
{
#define S_(x) #x
#define S(x) S_(x)
	return S(CKPT_VERSION_MAJOR) "." S(CKPT_VERSION_MINOR) "." S(CKPT_VERSION_PATCH);
}

unsigned ckpt_version_number(void)
{
	return CKPT_VERSION_NUMBER;
}

static const struct { size_t size; const char *name; } dtypes[CKPT_DTYPE_COUNT] = {
	[CKPT_DTYPE_BYTES] = { 1, "bytes" }, [CKPT_DTYPE_U8] = { 1, "u8" }, [CKPT_DTYPE_I8] = { 1, "i8" },
	[CKPT_DTYPE_I16] = { 2, "i16" }, [CKPT_DTYPE_U16] = { 2, "u16" }, [CKPT_DTYPE_I32] = { 4, "i32" },
	[CKPT_DTYPE_U32] = { 4, "u32" }, [CKPT_DTYPE_I64] = { 8, "i64" }, [CKPT_DTYPE_U64] = { 8, "u64" },
	[CKPT_DTYPE_F16] = { 2, "f16" }, [CKPT_DTYPE_BF16] = { 2, "bf16" }, [CKPT_DTYPE_F32] = { 4, "f32" },
	[CKPT_DTYPE_F64] = { 8, "f64" }, [CKPT_DTYPE_F8E4M3] = { 1, "f8e4m3" },
	[CKPT_DTYPE_F8E5M2] = { 1, "f8e5m2" }, [CKPT_DTYPE_BOOL] = { 1, "bool" },
};

size_t ckpt_dtype_size(ckpt_dtype d)
{
	return (unsigned)d < CKPT_DTYPE_COUNT ? dtypes[d].size : 0;
}

const char *ckpt_dtype_name(ckpt_dtype d)
{
	return (unsigned)d < CKPT_DTYPE_COUNT ? dtypes[d].name : "?";
}

const char *ckpt_state_name(ckpt_version_state s)
{
	switch (s) {
	case CKPT_STATE_PENDING: return "PENDING";
	case CKPT_STATE_COMMITTED: return "COMMITTED";
	case CKPT_STATE_DELETING: return "DELETING";
	}
	return "?";
}
