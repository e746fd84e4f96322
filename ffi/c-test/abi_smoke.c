/* Links libebpf_profiler.a from C and drives the error paths of the ABI:
 * what a C caller sees when the configuration is wrong. Run by
 * `make test-ffi-c` (mk/collector.mk). */
#include "ebpf_profiler.h"

#include <stdio.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what);
    failures++;
  }
}

int main(void) {
  check(ebpf_profiler_abi_version() == EBPF_PROFILER_ABI_VERSION, "abi version");

  ebpf_profiler *p = NULL;
  ebpf_profiler_status s = ebpf_profiler_start("{not json", &p);
  check(s == EBPF_PROFILER_ERR_CONFIG, "bad JSON gives ERR_CONFIG");
  check(p == NULL, "no handle on error");
  const char *msg = ebpf_profiler_last_error();
  check(msg != NULL && strstr(msg, "invalid configuration JSON") != NULL, "bad JSON message");
  printf("last_error: %s\n", msg ? msg : "(null)");

  s = ebpf_profiler_start(NULL, &p);
  check(s == EBPF_PROFILER_ERR_INVALID_ARGUMENT, "NULL config gives ERR_INVALID_ARGUMENT");

  /* A capacity whose allocation would fail aborted the whole process
   * before it was bounded; "[]" was read as every default. */
  s = ebpf_profiler_start("{\"batch_queue_capacity\":100000000000}", &p);
  msg = ebpf_profiler_last_error();
  check(s == EBPF_PROFILER_ERR_CONFIG && p == NULL && msg != NULL &&
            strstr(msg, "batch_queue_capacity must be between 1 and 1024") != NULL,
        "huge batch_queue_capacity gives ERR_CONFIG");
  s = ebpf_profiler_start("[]", &p);
  msg = ebpf_profiler_last_error();
  check(s == EBPF_PROFILER_ERR_CONFIG && p == NULL && msg != NULL &&
            strstr(msg, "expected a JSON object, got an array") != NULL,
        "[] gives ERR_CONFIG");

  ebpf_profiler_batch b = {0};
  check(ebpf_profiler_next_batch(NULL, 0, &b) == EBPF_PROFILER_ERR_INVALID_ARGUMENT, "next_batch(NULL)");
  ebpf_profiler_free_batch(&b);
  ebpf_profiler_free(NULL);

  printf("%d passed, %d failed\n", 8 - failures, failures);
  return failures ? 1 : 0;
}
