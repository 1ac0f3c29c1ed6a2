/* A C program that embeds libpython (Debian's libpython3.11 from libpython3.11-dev), the
 * way applications with a Python scripting layer ship it: the interpreter lives in the
 * shared library, the executable is not Python. Runs a script: embed_host SCRIPT [ARGS]. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s SCRIPT [ARGS...]\n", argv[0]);
		return 2;
	}
	PyConfig config;
	PyConfig_InitIsolatedConfig(&config);
	PyStatus st = PyConfig_SetBytesArgv(&config, argc - 1, argv + 1);
	if (!PyStatus_Exception(st))
		st = Py_InitializeFromConfig(&config);
	PyConfig_Clear(&config);
	if (PyStatus_Exception(st)) {
		fprintf(stderr, "embed_host: cannot initialize Python: %s\n",
			st.err_msg ? st.err_msg : "?");
		return 1;
	}
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		Py_Finalize();
		return 1;
	}
	int rc = PyRun_SimpleFileExFlags(f, argv[1], 1, NULL);
	if (Py_FinalizeEx() < 0)
		rc = 1;
	return rc ? 1 : 0;
}
