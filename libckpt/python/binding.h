/* What the extension's files share (libckpt/python). */
#ifndef CKPT_PY_BINDING_H
#define CKPT_PY_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Raises the ckpt.Error subclass for err (a negative code): "what: text". */
PyObject *ckpt_py_raise(int err, const char *what);
/* The same with a message of the caller's. */
PyObject *ckpt_py_raise_msg(int err, const char *msg);

/* ckpt._ckpt.View (view.c). */
extern PyTypeObject ckpt_py_view_type;

#endif
