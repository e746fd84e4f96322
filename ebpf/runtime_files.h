/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Includes ebpf/runtimes/<name>/<RUNTIME_FILE> of every runtime of
 * runtimes.h, in the list's order. The includer defines RUNTIME_FILE (a
 * file name: types.h, counters.h, unwinder.bpf.h), includes this file,
 * and undefines it. No include guard.
 *
 * The preprocessor cannot loop over #include, so the list is indexed:
 * the i-th runtime's name is picked out of the list's names
 * (RUNTIME_NAME_AT) for i below RUNTIME_COUNT, up to RUNTIME_FILES_MAX.
 */
#include "runtimes.h"

#ifndef EP_RUNTIME_FILES_H
#define EP_RUNTIME_FILES_H
#define RUNTIME_FILES_MAX 16
#define RUNTIME_CAT_(a, b) a##b
#define RUNTIME_CAT(a, b) RUNTIME_CAT_(a, b)
#define RUNTIME_STR_(x) #x
#define RUNTIME_STR(x) RUNTIME_STR_(x)
#define RUNTIME_CALL(f, ...) f(__VA_ARGS__)
#define RUNTIME_NAME_COMMA_(name, NAME, slot, map) name,
/* The list's names, each followed by a comma (so the last has one too). */
#define RUNTIME_NAMES RUNTIMES(RUNTIME_NAME_COMMA_)
#define RUNTIME_PICK_0(a0, ...) a0
#define RUNTIME_PICK_1(a0, a1, ...) a1
#define RUNTIME_PICK_2(a0, a1, a2, ...) a2
#define RUNTIME_PICK_3(a0, a1, a2, a3, ...) a3
#define RUNTIME_PICK_4(a0, a1, a2, a3, a4, ...) a4
#define RUNTIME_PICK_5(a0, a1, a2, a3, a4, a5, ...) a5
#define RUNTIME_PICK_6(a0, a1, a2, a3, a4, a5, a6, ...) a6
#define RUNTIME_PICK_7(a0, a1, a2, a3, a4, a5, a6, a7, ...) a7
#define RUNTIME_PICK_8(a0, a1, a2, a3, a4, a5, a6, a7, a8, ...) a8
#define RUNTIME_PICK_9(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, ...) a9
#define RUNTIME_PICK_10(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, ...) a10
#define RUNTIME_PICK_11(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, ...) a11
#define RUNTIME_PICK_12(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, ...) a12
#define RUNTIME_PICK_13(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, ...) a13
#define RUNTIME_PICK_14(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, ...) a14
#define RUNTIME_PICK_15(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, ...) a15
/* The name of the i-th runtime of the list. */
#define RUNTIME_NAME_AT(i) RUNTIME_CALL(RUNTIME_CAT(RUNTIME_PICK_, i), RUNTIME_NAMES)
/* "runtimes/<name>/<RUNTIME_FILE>" of the i-th runtime. */
#define RUNTIME_FILE_AT(i) RUNTIME_STR(runtimes/RUNTIME_NAME_AT(i)/RUNTIME_FILE)
#endif

#if RUNTIME_COUNT > RUNTIME_FILES_MAX
#error "more runtimes than runtime_files.h indexes: add RUNTIME_PICK_<i> and its line below"
#endif

#if 0 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(0)
#endif
#if 1 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(1)
#endif
#if 2 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(2)
#endif
#if 3 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(3)
#endif
#if 4 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(4)
#endif
#if 5 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(5)
#endif
#if 6 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(6)
#endif
#if 7 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(7)
#endif
#if 8 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(8)
#endif
#if 9 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(9)
#endif
#if 10 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(10)
#endif
#if 11 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(11)
#endif
#if 12 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(12)
#endif
#if 13 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(13)
#endif
#if 14 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(14)
#endif
#if 15 < RUNTIME_COUNT
#include RUNTIME_FILE_AT(15)
#endif
