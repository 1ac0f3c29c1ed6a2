/* --native tests: a C extension whose a() calls b(), which spins. Built by the tests with
 * -O2 -fomit-frame-pointer (no frame pointers: the unwind must use the CFI). noinline and the
 * volatile sink keep both functions and their call. a() keeps kSecret in its stack frame while
 * b() spins: BPF copies those bytes to unwind, and the agent must never send them on. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static volatile unsigned long sink;
/* tests/integration/test_native.cpp looks for it in everything a client got. */
static const char kSecret[] = "pbp-stack-secret-7f3a9c";

__attribute__((noinline)) static unsigned long b(unsigned long n)
{
	unsigned long x = 0;
	for (unsigned long i = 0; i < n; i++)
		x += i * 2654435761u ^ (x >> 3);
	sink = x;
	return x;
}

__attribute__((noinline)) static PyObject *a(PyObject *self, PyObject *arg)
{
	unsigned long n = PyLong_AsUnsignedLong(arg);
	if (PyErr_Occurred())
		return NULL;
	volatile char secret[sizeof kSecret];
	for (size_t i = 0; i < sizeof kSecret; i++)
		secret[i] = kSecret[i];
	unsigned long r = b(n);
	sink += 1 + secret[n % sizeof kSecret]; /* after the call: b's return address stays inside a */
	return PyLong_FromUnsignedLong(r);
}

/* For the cost measurements: n native frames, then b. */
__attribute__((noinline)) static unsigned long down(int n, unsigned long spins)
{
	if (n <= 1)
		return b(spins);
	unsigned long r = down(n - 1, spins);
	sink += r & 1; /* after the call: not a tail call */
	return r;
}

static PyObject *deep(PyObject *self, PyObject *args)
{
	int n;
	unsigned long spins;
	if (!PyArg_ParseTuple(args, "ik", &n, &spins))
		return NULL;
	return PyLong_FromUnsignedLong(down(n, spins));
}

static PyMethodDef methods[] = {
	{"a", a, METH_O, "calls b, which spins n times"},
	{"deep", deep, METH_VARARGS, "deep(n, spins): n native frames, then b"},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "native_chain_ext", NULL, -1, methods};

PyMODINIT_FUNC PyInit_native_chain_ext(void)
{
	return PyModule_Create(&module);
}
