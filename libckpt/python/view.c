/* ckpt._ckpt.View: a committed version read as global tensors, any rank's
 * pieces (ckpt_view_*). What the DCP StorageReader reads items through,
 * whatever the world size that loads them. Opening and reading run with
 * the GIL released; a lock keeps one call on the view at a time. */
#include "binding.h"
#include <pythread.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ckpt.h"

typedef struct {
	PyObject_HEAD
	ckpt_view *v;
	PyThread_type_lock lock;
} ViewObject;

static int view_enter(ViewObject *self)
{
	if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(self->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
	if (!self->v) {
		PyThread_release_lock(self->lock);
		ckpt_py_raise(-CKPT_ESTATE, "view: closed");
		return -1;
	}
	return 0;
}

/* View(root, job, version): version LATEST (2**64-1) for the newest committed. */
static int view_init(ViewObject *self, PyObject *args, PyObject *kwds)
{
	static char *kw[] = { "root", "job", "version", NULL };
	const char *root, *job;
	unsigned long long version;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "ssK", kw, &root, &job, &version))
		return -1;
	if (self->v) {
		PyErr_SetString(PyExc_RuntimeError, "View already open");
		return -1;
	}
	if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
		PyErr_NoMemory();
		return -1;
	}
	char why[512] = "";
	ckpt_view *v = NULL;
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_view_open(root, job, version, &v, why, sizeof(why));
	Py_END_ALLOW_THREADS
	if (err < 0) {
		char msg[900];
		if (version == CKPT_LATEST)
			snprintf(msg, sizeof(msg), "open the newest committed version of '%.64s': %s%s%s", job,
			         ckpt_strerror(err), why[0] ? ": " : "", why);
		else
			snprintf(msg, sizeof(msg), "open version %llu of '%.64s': %s%s%s", version, job, ckpt_strerror(err),
			         why[0] ? ": " : "", why);
		ckpt_py_raise_msg(err, msg);
		return -1;
	}
	self->v = v;
	return 0;
}

static PyObject *view_close(ViewObject *self, PyObject *unused)
{
	(void)unused;
	if (!self->lock)
		Py_RETURN_NONE;
	Py_BEGIN_ALLOW_THREADS
	PyThread_acquire_lock(self->lock, WAIT_LOCK);
	Py_END_ALLOW_THREADS
	ckpt_view_close(self->v);
	self->v = NULL;
	PyThread_release_lock(self->lock);
	Py_RETURN_NONE;
}

static void view_dealloc(ViewObject *self)
{
	ckpt_view_close(self->v);
	if (self->lock)
		PyThread_free_lock(self->lock);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *view_info(ViewObject *self, PyObject *unused)
{
	(void)unused;
	if (view_enter(self) < 0)
		return NULL;
	PyObject *r = Py_BuildValue("(KIn)", (unsigned long long)ckpt_view_version(self->v),
	                            ckpt_view_world_size(self->v), (Py_ssize_t)ckpt_view_count(self->v));
	PyThread_release_lock(self->lock);
	return r;
}

/* find(name) -> index, or None. */
static PyObject *view_find(ViewObject *self, PyObject *args)
{
	const char *name;
	if (!PyArg_ParseTuple(args, "s", &name))
		return NULL;
	if (view_enter(self) < 0)
		return NULL;
	size_t i = 0;
	int err = ckpt_view_find(self->v, name, &i);
	PyThread_release_lock(self->lock);
	if (err < 0)
		Py_RETURN_NONE;
	return PyLong_FromSize_t(i);
}

/* tensor(i) -> (name, dtype, shape tuple, bytes, missing, npieces). */
static PyObject *view_tensor(ViewObject *self, PyObject *args)
{
	Py_ssize_t i;
	if (!PyArg_ParseTuple(args, "n", &i))
		return NULL;
	if (view_enter(self) < 0)
		return NULL;
	ckpt_tensor_info t = { .size = sizeof(t) };
	int err = i < 0 ? -EINVAL : ckpt_view_tensor(self->v, (size_t)i, &t);
	PyObject *r = NULL;
	if (err == 0) {
		PyObject *shape = PyTuple_New(t.ndim);
		for (uint32_t k = 0; shape && k < t.ndim; k++)
			PyTuple_SET_ITEM(shape, k, PyLong_FromUnsignedLongLong(t.shape[k]));
		if (shape)
			r = Py_BuildValue("(ssNKKI)", t.name, ckpt_dtype_name(t.dtype), shape, (unsigned long long)t.bytes,
			                  (unsigned long long)t.missing, t.npieces);
	}
	PyThread_release_lock(self->lock);
	if (err < 0)
		return ckpt_py_raise(err, "view: tensor index");
	return r;
}

/* read_into(i, offset, buffer): bytes [offset, offset+len(buffer)) of tensor i
 * (row-major; a blob: its lowest rank's copy), every chunk verified. */
static PyObject *view_read_into(ViewObject *self, PyObject *args)
{
	Py_ssize_t i;
	unsigned long long off;
	Py_buffer buf;
	if (!PyArg_ParseTuple(args, "nKw*", &i, &off, &buf))
		return NULL;
	if (i < 0) {
		PyBuffer_Release(&buf);
		return ckpt_py_raise(-EINVAL, "view: tensor index");
	}
	if (!PyBuffer_IsContiguous(&buf, 'C')) {
		PyBuffer_Release(&buf);
		PyErr_SetString(PyExc_ValueError, "read_into: the buffer must be C-contiguous");
		return NULL;
	}
	if (view_enter(self) < 0) {
		PyBuffer_Release(&buf);
		return NULL;
	}
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = ckpt_view_read(self->v, (size_t)i, off, (uint64_t)buf.len, buf.buf);
	Py_END_ALLOW_THREADS
	char msg[900] = "";
	if (err < 0)
		snprintf(msg, sizeof(msg), "read of version %llu: %s: %s",
		         (unsigned long long)ckpt_view_version(self->v), ckpt_strerror(err), ckpt_view_error(self->v));
	PyThread_release_lock(self->lock);
	PyBuffer_Release(&buf);
	if (err < 0)
		return ckpt_py_raise_msg(err, msg);
	Py_RETURN_NONE;
}

static PyMethodDef view_methods[] = {
	{ "close", (PyCFunction)view_close, METH_NOARGS, "Closes the view (idempotent)." },
	{ "info", (PyCFunction)view_info, METH_NOARGS, "(version, world_size, tensor count)" },
	{ "find", (PyCFunction)view_find, METH_VARARGS, "find(name) -> index or None" },
	{ "tensor", (PyCFunction)view_tensor, METH_VARARGS,
	  "tensor(i) -> (name, dtype, shape, bytes, missing, npieces)" },
	{ "read_into", (PyCFunction)view_read_into, METH_VARARGS,
	  "read_into(i, offset, buffer): verified bytes of tensor i. Releases the GIL." },
	{ NULL }
};

PyTypeObject ckpt_py_view_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ckpt._ckpt.View",
	.tp_basicsize = sizeof(ViewObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "View(root, job, version): a committed version's global tensors (ckpt_view).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)view_init,
	.tp_dealloc = (destructor)view_dealloc,
	.tp_methods = view_methods,
};
