/* SPDX-License-Identifier: GPL-2.0 */
/*
 * PHP's part of the contract between the eBPF programs and user
 * space (included by ebpf/types.h through runtime_files.h; the same
 * rules: plain C, fixed-size integers, explicit reserved fields).
 */
#ifndef EP_RUNTIME_PHP_TYPES_H
#define EP_RUNTIME_PHP_TYPES_H

/* PHP (slot 5): [PHP_FRAME_TOP] |
 * line << PHP_FRAME_LINE_SHIFT | function >> 3: the zend_function the
 * frame runs, the line of its current opline counted from the
 * function's line_start (PHP_FRAME_LINE_MAX: unknown or larger), and
 * whether the frame is the first of its execute_ex run (ZEND_CALL_TOP).
 * See unwinder.bpf.h. */
#define PHP_FRAME_LINE_SHIFT 44
#define PHP_FRAME_LINE_MAX 0xfffULL
#define PHP_FRAME_TOP (1ULL << 56)
#define PHP_FRAME_PAYLOAD_BITS 57

/* PHP (unwinder.bpf.h). Offsets (bytes) in a zend_execute_data
 * read at once: every field lies below PHP_EXECUTE_DATA_READ. */
#define PHP_EXECUTE_DATA_READ 64

/* What the PHP unwinder needs of one (non-ZTS) PHP build
 * (php_files[file_id], set by user space from the ELF symbols and the
 * version's layout: crates/interpreters/src/php). */
struct php_file {
	__u64 executor_globals_vaddr;    /* executor_globals, ELF virtual address */
	__u32 eg_current_execute_data;   /* zend_executor_globals.current_execute_data */
	__u32 ex_opline;                 /* zend_execute_data.opline */
	__u32 ex_func;                   /* zend_execute_data.func */
	__u32 ex_call_info;              /* zend_execute_data.This.u1.type_info */
	__u32 ex_prev;                   /* zend_execute_data.prev_execute_data */
	__u32 op_lineno;                 /* zend_op.lineno */
	__u32 call_top;                  /* ZEND_CALL_TOP in the call info */
	__u32 op_array_line_start;       /* zend_op_array.line_start */
};

/* The PHP unwinder's scratch (struct interp_state, maps.h). */
struct php_scratch {
	/* The next zend_execute_data to record (0: none left). */
	__u64 ex;
	/* php_files[file_id], copied at the hand-over. */
	struct php_file file;
	/* One zend_execute_data, as read. */
	__u8 buf[PHP_EXECUTE_DATA_READ];
};

#endif
