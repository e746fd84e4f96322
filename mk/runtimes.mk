# The runtime version matrix (issue 36): the runtime chain tests against
# the releases of Debian trixie and sid, each in a root file system under
# /var/cache/ebpf-profiler-runtimes (tests/runtimes/rootfs.sh, built when
# missing; never in the repo) and run under chroot while the agent
# profiles from the host, next to the host's runtimes. Prints the table
# and writes it to target/runtimes-matrix.md; failing releases are listed
# with their reason, not hidden. Root.
.PHONY: test-runtimes

RUNTIME_SUITES ?= trixie sid
# e.g. RUNTIMES=ruby,python; RUNTIME_LOCK=/tmp/measure.lock flocks the tests of each runtime of a source.
RUNTIMES ?= ruby,php,perl,python,java,erlang,node
RUNTIME_LOCK ?=
# full: every test on every release; ci: every test on each runtime's
# newest release, its chain test on the others, each release once (CI's,
# with RUNTIME_FLAGS="--no-host --gate": the host's releases are make
# test's, and a failure fails CI).
RUNTIME_SCOPE ?= full
RUNTIME_FLAGS ?=

test-runtimes:
	PYTHONDONTWRITEBYTECODE=1 tests/runtimes/matrix.py --runtimes $(RUNTIMES) --scope $(RUNTIME_SCOPE) \
		$(RUNTIME_FLAGS) $(if $(RUNTIME_LOCK),--lock $(RUNTIME_LOCK)) $(RUNTIME_SUITES)
