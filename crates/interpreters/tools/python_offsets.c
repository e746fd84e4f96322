/*
 * Prints the struct offsets crates/interpreters/src/python/layout.rs
 * uses, from an installed CPython's own headers (3.8 to 3.13):
 *
 *   d=~/.pyenv/versions/3.11.7/include/python3.11
 *   gcc -w -I$d -o python_offsets python_offsets.c && ./python_offsets
 *
 * (Debian: apt-get install python3.11-dev, -I/usr/include/python3.11.)
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#elif PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#include "frameobject.h"
#else
#include "internal/pycore_pystate.h"
#include "frameobject.h"
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_code.h"
#endif
#define P(name, expr) printf("%-28s %zu\n", name, (size_t)(expr))
int main(void) {
  printf("version %s\n", PY_VERSION);
  P("runtime.interpreters.head", offsetof(_PyRuntimeState, interpreters.head));
  P("runtime.interpreters.main", offsetof(_PyRuntimeState, interpreters.main));
  P("interp.next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030B0000
  P("interp.threads_head", offsetof(PyInterpreterState, threads.head));
#else
  P("interp.threads_head", offsetof(PyInterpreterState, tstate_head));
#endif
  P("tstate.next", offsetof(PyThreadState, next));
  P("tstate.interp", offsetof(PyThreadState, interp));
  P("tstate.thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030B0000
  P("tstate.native_thread_id", offsetof(PyThreadState, native_thread_id));
#endif
#if PY_VERSION_HEX >= 0x030D0000
  P("tstate.current_frame", offsetof(PyThreadState, current_frame));
#elif PY_VERSION_HEX >= 0x030B0000
  P("tstate.cframe", offsetof(PyThreadState, cframe));
  P("cframe.current_frame", offsetof(_PyCFrame, current_frame));
#else
  P("tstate.frame", offsetof(PyThreadState, frame));
  P("frame.f_back", offsetof(PyFrameObject, f_back));
  P("frame.f_code", offsetof(PyFrameObject, f_code));
  P("frame.f_lasti", offsetof(PyFrameObject, f_lasti));
  P("sizeof f_lasti", sizeof(((PyFrameObject*)0)->f_lasti));
#endif
#if PY_VERSION_HEX >= 0x030B0000
#if PY_VERSION_HEX >= 0x030D0000
  P("iframe.f_code", offsetof(_PyInterpreterFrame, f_executable));
  P("iframe.instr", offsetof(_PyInterpreterFrame, instr_ptr));
#else
  P("iframe.f_code", offsetof(_PyInterpreterFrame, f_code));
  P("iframe.instr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
  P("iframe.previous", offsetof(_PyInterpreterFrame, previous));
#if PY_VERSION_HEX < 0x030C0000
  P("iframe.is_entry", offsetof(_PyInterpreterFrame, is_entry));
#endif
  P("iframe.owner", offsetof(_PyInterpreterFrame, owner));
  P("code.co_code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
  P("code.co_qualname", offsetof(PyCodeObject, co_qualname));
  P("code.co_linetable", offsetof(PyCodeObject, co_linetable));
#elif PY_VERSION_HEX >= 0x030A0000
  P("code.co_linetable", offsetof(PyCodeObject, co_linetable));
#else
  P("code.co_lnotab", offsetof(PyCodeObject, co_lnotab));
#endif
  P("code.co_filename", offsetof(PyCodeObject, co_filename));
  P("code.co_name", offsetof(PyCodeObject, co_name));
  P("code.co_firstlineno", offsetof(PyCodeObject, co_firstlineno));
  P("bytes.ob_size", offsetof(PyBytesObject, ob_base.ob_size));
  P("bytes.ob_sval", offsetof(PyBytesObject, ob_sval));
  P("sizeof PyASCIIObject", sizeof(PyASCIIObject));
  P("sizeof PyCompactUnicodeObject", sizeof(PyCompactUnicodeObject));
  P("unicode.length", offsetof(PyASCIIObject, length));
  P("unicode.state", offsetof(PyASCIIObject, state));
  return 0;
}
