/* ckpt._ckpt: the CPython extension over ckpt.h (and nothing else of the
 * library). A thin layer: the Python package (ckpt/__init__.py) turns state
 * dicts into regions and errors into ckpt.Error subclasses.
 *
 * Every call that waits or copies (open, close, save, fence, restore, the
 * handle's wait) runs with the GIL released. A context is used by one
 * thread at a time (ckpt.h); a lock per Context object makes that so
 * whatever Python threads do, so that no misuse from Python reaches the
 * library concurrently. Host regions are buffers (buffer protocol, writable,
 * C-contiguous) held until the region is removed or the context closed;
 * CUDA regions are device addresses, which the library checks. */
#include "binding.h"
#include <pythread.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"

/* The factory ckpt/__init__.py installs: factory(code, message) returns the
 * exception to raise. Before it is set, RuntimeError. */
static PyObject *error_factory;

PyObject *ckpt_py_raise_msg(int err, const char *text)
{
	PyObject *msg = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
	if (!msg)
		return NULL;
	if (!error_factory) {
		PyErr_SetObject(PyExc_RuntimeError, msg);
		Py_DECREF(msg);
		return NULL;
	}
	PyObject *exc = PyObject_CallFunction(error_factory, "iO", err, msg);
	Py_DECREF(msg);
	if (!exc)
		return NULL;
	PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
	Py_DECREF(exc);
	return NULL;
}

PyObject *ckpt_py_raise(int err, const char *what)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s: %s", what, ckpt_strerror(err));
	return ckpt_py_raise_msg(err, buf);
}

static PyObject *raise_err(int err, const char *what)
{
	return ckpt_py_raise(err, what);
}

/* ------------------------------------------------------------- Handle */

typedef struct {
	PyObject_HEAD
	ckpt_handle *h;
	unsigned long long version;
} HandleObject;

static PyObject *status_dict(const ckpt_status *st)
{
	return Py_BuildValue("{s:K,s:I,s:i,s:i,s:O,s:K,s:K,s:K,s:K,s:I,s:I}", "version",
	                     (unsigned long long)st->version, "tier", st->tier, "error", st->error,
	                     "sys_errno", st->sys_errno, "committed", st->committed ? Py_True : Py_False,
	                     "bytes", (unsigned long long)st->bytes, "stored_bytes",
	                     (unsigned long long)st->stored_bytes, "stall_ns", (unsigned long long)st->stall_ns,
	                     "durable_ns", (unsigned long long)st->durable_ns, "tiers_reached", st->tiers_reached,
	                     "tiers_failed", st->tiers_failed);
}

static PyObject *handle_wait(HandleObject *self, PyObject *args)
{
	unsigned int tier;
	long long timeout_ms;
	if (!PyArg_ParseTuple(args, "IL", &tier, &timeout_ms))
		return NULL;
	if (!self->h)
		return raise_err(-CKPT_ESTATE, "wait: the handle was released");
	ckpt_status st = { .size = sizeof(st) };
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_handle_wait(self->h, tier, timeout_ms < 0 ? -1 : timeout_ms, &st);
	Py_END_ALLOW_THREADS
	if (err < 0) {
		char what[96];
		snprintf(what, sizeof(what), "wait for version %llu", self->version);
		return raise_err(err, what);
	}
	return status_dict(&st);
}

/* None while the save is in progress, else the status (raises on failure). */
static PyObject *handle_test(HandleObject *self, PyObject *args)
{
	unsigned int tier;
	if (!PyArg_ParseTuple(args, "I", &tier))
		return NULL;
	if (!self->h)
		return raise_err(-CKPT_ESTATE, "test: the handle was released");
	ckpt_status st = { .size = sizeof(st) };
	int err = ckpt_handle_test(self->h, tier, &st);
	if (err == -EAGAIN)
		Py_RETURN_NONE;
	if (err < 0) {
		char what[96];
		snprintf(what, sizeof(what), "save of version %llu", self->version);
		return raise_err(err, what);
	}
	return status_dict(&st);
}

static void handle_dealloc(HandleObject *self)
{
	ckpt_handle_free(self->h);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef handle_methods[] = {
	{ "wait", (PyCFunction)handle_wait, METH_VARARGS,
	  "wait(tier, timeout_ms) -> status dict; timeout_ms < 0 waits forever. Releases the GIL." },
	{ "test", (PyCFunction)handle_test, METH_VARARGS, "test(tier) -> status dict, or None in progress." },
	{ NULL }
};

static PyTypeObject HandleType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ckpt._ckpt.Handle",
	.tp_basicsize = sizeof(HandleObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A save in progress (ckpt_handle).",
	.tp_dealloc = (destructor)handle_dealloc,
	.tp_methods = handle_methods,
};

/* ------------------------------------------------------------- Context */

/* A host region's buffer, held while registered. */
typedef struct held {
	char *name;
	Py_buffer view; /* view.obj NULL for CUDA regions */
	struct held *next;
} held;

typedef struct {
	PyObject_HEAD
	ckpt_ctx *ctx;
	PyThread_type_lock lock; /* one call on ctx at a time */
	held *regions;
} ContextObject;

/* Takes the context's lock without holding the GIL. Returns 0, or raises
 * (closed context) and returns -1 with the lock released. */
static int ctx_enter(ContextObject *self, const char *what)
{
	if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(self->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
	if (!self->ctx) {
		PyThread_release_lock(self->lock);
		char buf[96];
		snprintf(buf, sizeof(buf), "%s: the checkpointer is closed", what);
		raise_err(-CKPT_ESTATE, buf);
		return -1;
	}
	return 0;
}

static void ctx_leave(ContextObject *self)
{
	PyThread_release_lock(self->lock);
}

static void held_free(held *h)
{
	if (h->view.obj)
		PyBuffer_Release(&h->view);
	free(h->name);
	free(h);
}

static int context_init(ContextObject *self, PyObject *args, PyObject *kwds)
{
	static char *kw[] = { "settings", NULL };
	PyObject *settings;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!", kw, &PyDict_Type, &settings))
		return -1;
	if (self->ctx) {
		PyErr_SetString(PyExc_RuntimeError, "Context already open");
		return -1;
	}
	if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
		PyErr_NoMemory();
		return -1;
	}
	ckpt_config cfg;
	int err = ckpt_config_init(&cfg);
	if (err < 0) {
		raise_err(err, "a CKPT_* environment variable holds an invalid value (logged above)");
		return -1;
	}
	PyObject *k, *v;
	Py_ssize_t pos = 0;
	while (PyDict_Next(settings, &pos, &k, &v)) {
		const char *ks = PyUnicode_AsUTF8(k), *vs = ks ? PyUnicode_AsUTF8(v) : NULL;
		if (!ks || !vs) {
			ckpt_config_free_strings(&cfg);
			if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
				PyErr_Clear();
				PyErr_SetString(PyExc_TypeError, "settings: keys and values must be str");
			}
			return -1;
		}
		if ((err = ckpt_config_set(&cfg, ks, vs)) < 0) {
			ckpt_config_free_strings(&cfg);
			char what[320];
			snprintf(what, sizeof(what), "setting %.64s = '%.200s'", ks, vs);
			raise_err(err, what);
			return -1;
		}
	}
	ckpt_ctx *ctx = NULL;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_ctx_open(&cfg, &ctx);
	Py_END_ALLOW_THREADS
	ckpt_config_free_strings(&cfg); /* the context keeps copies */
	if (err < 0) {
		raise_err(err, "open (the log above says why)");
		return -1;
	}
	self->ctx = ctx;
	return 0;
}

/* Closes the context (waits for pending saves). Idempotent. */
static int context_close_locked(ContextObject *self)
{
	ckpt_ctx *ctx = self->ctx;
	self->ctx = NULL;
	int err = 0;
	if (ctx) {
		Py_BEGIN_ALLOW_THREADS
		err = ckpt_ctx_close(ctx);
		Py_END_ALLOW_THREADS
	}
	while (self->regions) {
		held *n = self->regions->next;
		held_free(self->regions);
		self->regions = n;
	}
	return err;
}

static PyObject *context_close(ContextObject *self, PyObject *unused)
{
	(void)unused;
	if (!self->lock)
		Py_RETURN_NONE;
	Py_BEGIN_ALLOW_THREADS
	PyThread_acquire_lock(self->lock, WAIT_LOCK);
	Py_END_ALLOW_THREADS
	int err = context_close_locked(self);
	PyThread_release_lock(self->lock);
	if (err < 0)
		return raise_err(err, "close: a pending save failed");
	Py_RETURN_NONE;
}

static void context_dealloc(ContextObject *self)
{
	if (self->lock) {
		PyThread_acquire_lock(self->lock, WAIT_LOCK);
		context_close_locked(self);
		PyThread_release_lock(self->lock);
		PyThread_free_lock(self->lock);
	}
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *context_closed(ContextObject *self, void *unused)
{
	(void)unused;
	return PyBool_FromLong(self->ctx == NULL);
}

/* Reads a sequence of up to CKPT_MAX_DIMS non-negative ints. */
static int dims(PyObject *seq, uint64_t *out, uint32_t *n, const char *what)
{
	PyObject *fast = PySequence_Fast(seq, what);
	if (!fast)
		return -1;
	Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
	if (len > CKPT_MAX_DIMS) {
		Py_DECREF(fast);
		PyErr_Format(PyExc_ValueError, "%s: at most %d dimensions", what, CKPT_MAX_DIMS);
		return -1;
	}
	for (Py_ssize_t i = 0; i < len; i++) {
		unsigned long long v = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fast, i));
		if (PyErr_Occurred()) {
			Py_DECREF(fast);
			PyErr_Format(PyExc_ValueError, "%s: dimensions are non-negative ints", what);
			return -1;
		}
		out[i] = v;
	}
	*n = (uint32_t)len;
	Py_DECREF(fast);
	return 0;
}

/* region_add(name, buffer_or_address, nbytes, dtype, device, shape, offsets, extents)
 * Host: a writable C-contiguous buffer (nbytes must equal its length).
 * CUDA: an int device address. shape/offsets/extents: () for none, or the
 * global shape, this rank's offsets and extents. */
static PyObject *context_region_add(ContextObject *self, PyObject *args)
{
	const char *name;
	PyObject *mem, *shape, *offs, *exts;
	unsigned long long nbytes;
	int dtype, device;
	if (!PyArg_ParseTuple(args, "sOKiiOOO", &name, &mem, &nbytes, &dtype, &device, &shape, &offs, &exts))
		return NULL;
	ckpt_region_desc d;
	memset(&d, 0, sizeof(d));
	d.size = sizeof(d);
	d.name = name;
	d.bytes = nbytes;
	d.dtype = (ckpt_dtype)dtype;
	d.device = (ckpt_device)device;
	uint32_t n1 = 0, n2 = 0, n3 = 0;
	if (dims(shape, d.global_shape, &n1, "shape") < 0 || dims(offs, d.offsets, &n2, "offsets") < 0 ||
	    dims(exts, d.extents, &n3, "extents") < 0)
		return NULL;
	if (n1 != n2 || n1 != n3) {
		PyErr_SetString(PyExc_ValueError, "shape, offsets and extents need the same number of dimensions");
		return NULL;
	}
	d.ndim = n1;
	held *h = calloc(1, sizeof(*h));
	if (!h || !(h->name = strdup(name))) {
		free(h);
		return PyErr_NoMemory();
	}
	if (device == CKPT_DEVICE_HOST) {
		if (PyObject_GetBuffer(mem, &h->view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
			held_free(h);
			return NULL;
		}
		if ((unsigned long long)h->view.len != nbytes) {
			PyErr_Format(PyExc_ValueError, "region '%s': the buffer holds %zd bytes, not %llu", name,
			             h->view.len, nbytes);
			held_free(h);
			return NULL;
		}
		d.ptr = h->view.buf;
	} else {
		d.ptr = PyLong_AsVoidPtr(mem);
		if (PyErr_Occurred()) {
			held_free(h);
			return NULL;
		}
	}
	if (ctx_enter(self, "region_add") < 0) {
		held_free(h);
		return NULL;
	}
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_region_add(self->ctx, &d);
	Py_END_ALLOW_THREADS
	if (err == 0) {
		h->next = self->regions;
		self->regions = h;
	}
	ctx_leave(self);
	if (err < 0) {
		held_free(h);
		char what[320];
		snprintf(what, sizeof(what), "region '%.255s'", name);
		return raise_err(err, what);
	}
	Py_RETURN_NONE;
}

static PyObject *context_region_remove(ContextObject *self, PyObject *args)
{
	const char *name;
	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	if (ctx_enter(self, "region_remove") < 0)
		return NULL;
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_region_remove(self->ctx, name);
	Py_END_ALLOW_THREADS
	held *gone = NULL;
	if (err == 0)
		for (held **p = &self->regions; *p; p = &(*p)->next)
			if (!strcmp((*p)->name, name)) {
				gone = *p;
				*p = gone->next;
				break;
			}
	ctx_leave(self);
	if (gone)
		held_free(gone);
	if (err < 0) {
		char what[320];
		snprintf(what, sizeof(what), "remove region '%.255s'", name);
		return raise_err(err, what);
	}
	Py_RETURN_NONE;
}

static PyObject *context_save(ContextObject *self, PyObject *args)
{
	unsigned long long version;
	int lazy;
	if (!PyArg_ParseTuple(args, "Kp", &version, &lazy))
		return NULL;
	HandleObject *ho = PyObject_New(HandleObject, &HandleType);
	if (!ho)
		return NULL;
	ho->h = NULL;
	ho->version = version;
	if (ctx_enter(self, "save") < 0) {
		Py_DECREF(ho);
		return NULL;
	}
	int err;
	ckpt_handle *h = NULL;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_save(self->ctx, version, lazy ? CKPT_SAVE_LAZY : CKPT_SAVE_DEFAULT, &h);
	Py_END_ALLOW_THREADS
	ctx_leave(self);
	if (err < 0) {
		Py_DECREF(ho);
		char what[64];
		snprintf(what, sizeof(what), "save version %llu", version);
		return raise_err(err, what);
	}
	ho->h = h;
	return (PyObject *)ho;
}

static PyObject *context_fence(ContextObject *self, PyObject *unused)
{
	(void)unused;
	if (ctx_enter(self, "fence") < 0)
		return NULL;
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_fence(self->ctx);
	Py_END_ALLOW_THREADS
	ctx_leave(self);
	if (err < 0)
		return raise_err(err, "fence");
	Py_RETURN_NONE;
}

/* restore(version) -> the version restored. */
static PyObject *context_restore(ContextObject *self, PyObject *args)
{
	unsigned long long version;
	if (!PyArg_ParseTuple(args, "K", &version))
		return NULL;
	if (ctx_enter(self, "restore") < 0)
		return NULL;
	int err;
	uint64_t got = 0;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_restore(self->ctx, version, 0, &got);
	Py_END_ALLOW_THREADS
	ctx_leave(self);
	if (err < 0) {
		char what[64];
		if (version == CKPT_LATEST)
			snprintf(what, sizeof(what), "restore latest");
		else
			snprintf(what, sizeof(what), "restore version %llu", version);
		return raise_err(err, what);
	}
	return PyLong_FromUnsignedLongLong(got);
}

static PyObject *context_step(ContextObject *self, PyObject *args)
{
	unsigned long long step;
	if (!PyArg_ParseTuple(args, "K", &step))
		return NULL;
	if (ctx_enter(self, "step") < 0)
		return NULL;
	int act = ckpt_step(self->ctx, step); /* no system call on its fast path */
	ctx_leave(self);
	if (act < 0)
		return raise_err(act, "step");
	return PyLong_FromLong(act);
}

static PyObject *context_preempt_install(ContextObject *self, PyObject *args)
{
	PyObject *sigs = Py_None;
	if (!PyArg_ParseTuple(args, "|O", &sigs))
		return NULL;
	int buf[16], n = 0;
	if (sigs != Py_None) {
		PyObject *fast = PySequence_Fast(sigs, "signals: a sequence of signal numbers");
		if (!fast)
			return NULL;
		Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
		if (len > 16 || len == 0) {
			Py_DECREF(fast);
			PyErr_SetString(PyExc_ValueError, "signals: 1 to 16 signal numbers");
			return NULL;
		}
		for (Py_ssize_t i = 0; i < len; i++) {
			long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
			if (v == -1 && PyErr_Occurred()) {
				Py_DECREF(fast);
				return NULL;
			}
			buf[n++] = (int)v;
		}
		Py_DECREF(fast);
	}
	if (ctx_enter(self, "install_preemption_handlers") < 0)
		return NULL;
	int err = ckpt_preempt_install(self->ctx, sigs == Py_None ? NULL : buf, sigs == Py_None ? 0 : n);
	ctx_leave(self);
	if (err < 0)
		return raise_err(err, "install_preemption_handlers");
	Py_RETURN_NONE;
}

static PyObject *context_preempt_notice(ContextObject *self, PyObject *args)
{
	unsigned long long deadline_ns = 0;
	if (!PyArg_ParseTuple(args, "|K", &deadline_ns))
		return NULL;
	if (ctx_enter(self, "preempt_notice") < 0)
		return NULL;
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_preempt_notice(self->ctx, deadline_ns);
	Py_END_ALLOW_THREADS
	ctx_leave(self);
	if (err < 0)
		return raise_err(err, "preempt_notice");
	Py_RETURN_NONE;
}

static PyObject *context_cuda_stream_set(ContextObject *self, PyObject *args)
{
	PyObject *o;
	if (!PyArg_ParseTuple(args, "O", &o))
		return NULL;
	void *stream = o == Py_None ? NULL : PyLong_AsVoidPtr(o);
	if (PyErr_Occurred())
		return NULL;
	if (ctx_enter(self, "cuda_stream_set") < 0)
		return NULL;
	int err = ckpt_cuda_stream_set(self->ctx, stream);
	ctx_leave(self);
	if (err < 0)
		return raise_err(err, "cuda_stream_set");
	Py_RETURN_NONE;
}

/* version_delete(version): ckpt_version_delete. */
static PyObject *context_version_delete(ContextObject *self, PyObject *args)
{
	unsigned long long version;
	if (!PyArg_ParseTuple(args, "K", &version))
		return NULL;
	if (ctx_enter(self, "delete") < 0)
		return NULL;
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_version_delete(self->ctx, version);
	Py_END_ALLOW_THREADS
	ctx_leave(self);
	if (err < 0) {
		char what[64];
		snprintf(what, sizeof(what), "delete version %llu", version);
		return raise_err(err, what);
	}
	Py_RETURN_NONE;
}

/* staging_size() -> (pool bytes, bytes the last save staged). */
static PyObject *context_staging_size(ContextObject *self, PyObject *unused)
{
	(void)unused;
	if (ctx_enter(self, "staging_size") < 0)
		return NULL;
	uint64_t pool = 0, need = 0;
	int err = ckpt_staging_size(self->ctx, &pool, &need);
	ctx_leave(self);
	if (err < 0)
		return raise_err(err, "staging_size");
	return Py_BuildValue("(KK)", (unsigned long long)pool, (unsigned long long)need);
}

/* restorable() -> [int], oldest first (ckpt_versions_restorable). */
static PyObject *context_restorable(ContextObject *self, PyObject *unused)
{
	(void)unused;
	if (ctx_enter(self, "restorable") < 0)
		return NULL;
	size_t count = 0, cap = 0;
	uint64_t *v = NULL;
	int err;
	for (int tries = 0; tries < 4; tries++) {
		Py_BEGIN_ALLOW_THREADS
		err = ckpt_versions_restorable(self->ctx, v, cap, &count);
		Py_END_ALLOW_THREADS
		if (err < 0 || count <= cap)
			break;
		free(v);
		cap = count + 16;
		if (!(v = calloc(cap, sizeof(*v)))) {
			ctx_leave(self);
			return PyErr_NoMemory();
		}
	}
	ctx_leave(self);
	if (err < 0) {
		free(v);
		return raise_err(err, "restorable");
	}
	size_t n = count < cap ? count : cap;
	PyObject *list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *x = PyLong_FromUnsignedLongLong((unsigned long long)v[i]);
		if (!x) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, x);
	}
	free(v);
	return list;
}

/* versions() -> [dict], oldest first. */
static PyObject *context_versions(ContextObject *self, PyObject *unused)
{
	(void)unused;
	if (ctx_enter(self, "versions") < 0)
		return NULL;
	size_t count = 0, cap = 0;
	ckpt_version_info *vi = NULL;
	int err;
	/* The list may grow between the two calls: retry with its new length. */
	for (int tries = 0; tries < 4; tries++) {
		Py_BEGIN_ALLOW_THREADS
		err = ckpt_versions_list(self->ctx, vi, cap, &count);
		Py_END_ALLOW_THREADS
		if (err < 0 || count <= cap)
			break;
		free(vi);
		cap = count + 16;
		vi = calloc(cap, sizeof(*vi));
		if (!vi) {
			ctx_leave(self);
			return PyErr_NoMemory();
		}
		for (size_t i = 0; i < cap; i++)
			vi[i].size = sizeof(*vi);
	}
	ctx_leave(self);
	if (err < 0) {
		free(vi);
		return raise_err(err, "versions");
	}
	size_t n = count < cap ? count : cap;
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *d = Py_BuildValue("{s:K,s:s,s:I,s:I,s:K,s:K,s:K,s:K}", "version",
		                            (unsigned long long)vi[i].version, "state", ckpt_state_name(vi[i].state),
		                            "world_size", vi[i].world_size, "shards_done", vi[i].shards_done, "bytes",
		                            (unsigned long long)vi[i].bytes, "stored_bytes",
		                            (unsigned long long)vi[i].stored_bytes, "created_ns",
		                            (unsigned long long)vi[i].created_ns, "committed_ns",
		                            (unsigned long long)vi[i].committed_ns);
		if (!d || PyList_Append(list, d) < 0) {
			Py_XDECREF(d);
			Py_CLEAR(list);
			break;
		}
		Py_DECREF(d);
	}
	free(vi);
	return list;
}

static PyMethodDef context_methods[] = {
	{ "close", (PyCFunction)context_close, METH_NOARGS, "Waits for pending saves, frees the context." },
	{ "region_add", (PyCFunction)context_region_add, METH_VARARGS,
	  "region_add(name, buffer_or_address, nbytes, dtype, device, shape, offsets, extents)" },
	{ "region_remove", (PyCFunction)context_region_remove, METH_VARARGS, "region_remove(name)" },
	{ "save", (PyCFunction)context_save, METH_VARARGS, "save(version, lazy) -> Handle" },
	{ "fence", (PyCFunction)context_fence, METH_NOARGS, "Waits for lazy saves' device copies." },
	{ "restore", (PyCFunction)context_restore, METH_VARARGS, "restore(version) -> version restored" },
	{ "step", (PyCFunction)context_step, METH_VARARGS, "step(n) -> 0 continue, 1 save, 2 exit" },
	{ "preempt_install", (PyCFunction)context_preempt_install, METH_VARARGS,
	  "preempt_install(signals=None)" },
	{ "preempt_notice", (PyCFunction)context_preempt_notice, METH_VARARGS, "preempt_notice(deadline_ns=0)" },
	{ "cuda_stream_set", (PyCFunction)context_cuda_stream_set, METH_VARARGS, "cuda_stream_set(stream or None)" },
	{ "versions", (PyCFunction)context_versions, METH_NOARGS, "versions() -> [dict], oldest first" },
	{ "restorable", (PyCFunction)context_restorable, METH_NOARGS,
	  "restorable() -> [int]: the versions a restore of the newest would try, oldest first" },
	{ "version_delete", (PyCFunction)context_version_delete, METH_VARARGS, "version_delete(version)" },
	{ "staging_size", (PyCFunction)context_staging_size, METH_NOARGS,
	  "staging_size() -> (pool bytes, bytes the last save staged)" },
	{ NULL }
};

static PyGetSetDef context_getset[] = {
	{ "closed", (getter)context_closed, NULL, "True once closed", NULL },
	{ NULL }
};

static PyTypeObject ContextType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ckpt._ckpt.Context",
	.tp_basicsize = sizeof(ContextObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Context(settings: dict[str, str]): a ckpt_ctx opened with CKPT_* variables, then settings.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)context_init,
	.tp_dealloc = (destructor)context_dealloc,
	.tp_methods = context_methods,
	.tp_getset = context_getset,
};

/* ------------------------------------------------------------- module */

static PyObject *mod_strerror(PyObject *m, PyObject *args)
{
	(void)m;
	int err;
	if (!PyArg_ParseTuple(args, "i", &err))
		return NULL;
	return PyUnicode_FromString(ckpt_strerror(err));
}

static PyObject *mod_set_error_factory(PyObject *m, PyObject *f)
{
	(void)m;
	if (!PyCallable_Check(f)) {
		PyErr_SetString(PyExc_TypeError, "factory must be callable");
		return NULL;
	}
	Py_INCREF(f);
	Py_XSETREF(error_factory, f);
	Py_RETURN_NONE;
}

static PyObject *mod_config_help(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return PyErr_NoMemory();
	ckpt_config_help(f);
	fclose(f);
	PyObject *s = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
	free(buf);
	return s;
}

static PyObject *mod_cuda_available(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyBool_FromLong(ckpt_cuda_available());
}

static PyMethodDef module_methods[] = {
	{ "strerror", mod_strerror, METH_VARARGS, "strerror(code) -> str" },
	{ "_set_error_factory", mod_set_error_factory, METH_O, "factory(code, message) -> exception" },
	{ "config_help", mod_config_help, METH_NOARGS, "The settings table (ckpt --help-config)." },
	{ "cuda_available", mod_cuda_available, METH_NOARGS, "True with CUDA support and a device." },
	{ NULL }
};

static struct PyModuleDef moduledef = {
	PyModuleDef_HEAD_INIT, "_ckpt", "CPython binding of libckpt (ckpt.h).", -1, module_methods,
};

#define ADD_INT(m, name, v) \
	do { if (PyModule_AddIntConstant(m, name, (long)(v)) < 0) goto fail; } while (0)

PyMODINIT_FUNC PyInit__ckpt(void)
{
	if (PyType_Ready(&HandleType) < 0 || PyType_Ready(&ContextType) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&moduledef);
	if (!m)
		return NULL;
	Py_INCREF(&ContextType);
	if (PyModule_AddObject(m, "Context", (PyObject *)&ContextType) < 0) {
		Py_DECREF(&ContextType);
		goto fail;
	}
	if (PyType_Ready(&ckpt_py_view_type) < 0)
		goto fail;
	Py_INCREF(&ckpt_py_view_type);
	if (PyModule_AddObject(m, "View", (PyObject *)&ckpt_py_view_type) < 0) {
		Py_DECREF(&ckpt_py_view_type);
		goto fail;
	}
	Py_INCREF(&HandleType);
	if (PyModule_AddObject(m, "Handle", (PyObject *)&HandleType) < 0) {
		Py_DECREF(&HandleType);
		goto fail;
	}
	if (PyModule_AddStringConstant(m, "LIB_VERSION", ckpt_version()) < 0)
		goto fail;
	if (PyModule_AddObject(m, "LATEST", PyLong_FromUnsignedLongLong(CKPT_LATEST)) < 0)
		goto fail;
	ADD_INT(m, "ERRNO_OFFSET", CKPT_ERRNO_OFFSET);
	ADD_INT(m, "ECORRUPT", CKPT_ECORRUPT);
	ADD_INT(m, "EFORMAT", CKPT_EFORMAT);
	ADD_INT(m, "ENOVERSION", CKPT_ENOVERSION);
	ADD_INT(m, "ESKIPPED", CKPT_ESKIPPED);
	ADD_INT(m, "EMISMATCH", CKPT_EMISMATCH);
	ADD_INT(m, "ECONFIG", CKPT_ECONFIG);
	ADD_INT(m, "EINDEX", CKPT_EINDEX);
	ADD_INT(m, "ENAME", CKPT_ENAME);
	ADD_INT(m, "ETOOBIG", CKPT_ETOOBIG);
	ADD_INT(m, "ESTATE", CKPT_ESTATE);
	ADD_INT(m, "EFAULT_INJECTED", CKPT_EFAULT_INJECTED);
	ADD_INT(m, "EDEVICE", CKPT_EDEVICE);
	ADD_INT(m, "ECONTRACT", CKPT_ECONTRACT);
	ADD_INT(m, "EUNAVAIL", CKPT_EUNAVAIL);
	ADD_INT(m, "EUNREACHABLE", CKPT_EUNREACHABLE);
	ADD_INT(m, "TIER_LOCAL_MEM", CKPT_TIER_LOCAL_MEM);
	ADD_INT(m, "TIER_PEER_MEM", CKPT_TIER_PEER_MEM);
	ADD_INT(m, "TIER_LOCAL_DISK", CKPT_TIER_LOCAL_DISK);
	ADD_INT(m, "TIER_SHARED", CKPT_TIER_SHARED);
	ADD_INT(m, "DEVICE_HOST", CKPT_DEVICE_HOST);
	ADD_INT(m, "DEVICE_CUDA", CKPT_DEVICE_CUDA);
	ADD_INT(m, "MAX_DIMS", CKPT_MAX_DIMS);
	ADD_INT(m, "MAX_NAME", CKPT_MAX_NAME);
	ADD_INT(m, "STEP_CONTINUE", CKPT_STEP_CONTINUE);
	ADD_INT(m, "STEP_SAVE", CKPT_STEP_SAVE);
	ADD_INT(m, "STEP_EXIT", CKPT_STEP_EXIT);
	/* dtypes by the library's own names: "f32", "bf16", ... */
	PyObject *dt = PyDict_New();
	if (!dt || PyModule_AddObject(m, "DTYPES", dt) < 0) {
		Py_XDECREF(dt);
		goto fail;
	}
	for (int t = 0; t < CKPT_DTYPE_COUNT; t++) {
		PyObject *v = Py_BuildValue("(in)", t, (Py_ssize_t)ckpt_dtype_size((ckpt_dtype)t));
		if (!v || PyDict_SetItemString(dt, ckpt_dtype_name((ckpt_dtype)t), v) < 0) {
			Py_XDECREF(v);
			goto fail;
		}
		Py_DECREF(v);
	}
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
