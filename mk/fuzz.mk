# Fuzzing (cargo-fuzz, nightly): see fuzz/README.md.
#   make fuzz-smoke                 every target FUZZ_SMOKE_SECONDS (60 s; CI runs 30 s)
#   make fuzz FUZZ_SECONDS=3600     every target FUZZ_SECONDS
#   make fuzz FUZZ_TARGETS=python   some targets only
FUZZ_SECONDS ?= 3600
FUZZ_SMOKE_SECONDS ?= 60
FUZZ_TARGETS ?= elf_file unwind_table gopclntab dwarf_symbolize python sample_decoder
FUZZ_RSS_MB ?= 2048
FUZZ_NICE ?= nice -n 19
FUZZ_CARGO ?= cargo +nightly fuzz

# Longest input per target: whole ELF files for the file parsers (real
# seeds are truncated to it), a page for the small ones.
fuzz_max_len_elf_file := 1048576
fuzz_max_len_unwind_table := 1048576
fuzz_max_len_gopclntab := 2097152
fuzz_max_len_dwarf_symbolize := 1048576
fuzz_max_len_python := 4096
fuzz_max_len_sample_decoder := 8192

.PHONY: fuzz fuzz-smoke fuzz-seed fuzz-build

fuzz-seed:
	fuzz/seed.sh

# cargo-fuzz comes from crates.io when missing (the nightly toolchain it
# drives is part of the machine's rustup install).
fuzz-build:
	@cargo +nightly fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	$(FUZZ_NICE) $(FUZZ_CARGO) build --fuzz-dir fuzz

# Runs target $(1) for $(2) seconds; fails on a crash, leak, OOM (over
# FUZZ_RSS_MB) or timeout, leaving the input in fuzz/artifacts/$(1)/
# and the whole output in fuzz/last-$(1).log.
define fuzz_run
	@echo "== fuzz $(1) for $(2) s (max_len $(fuzz_max_len_$(1)))"
	@set -o pipefail; $(FUZZ_NICE) $(FUZZ_CARGO) run --fuzz-dir fuzz $(1) fuzz/corpus/$(1) -- \
	  -max_total_time=$(2) -rss_limit_mb=$(FUZZ_RSS_MB) -malloc_limit_mb=$(FUZZ_RSS_MB) -timeout=30 \
	  -max_len=$(fuzz_max_len_$(1)) -print_final_stats=1 > fuzz/last-$(1).log 2>&1 \
	  || { tail -40 fuzz/last-$(1).log; echo "fuzz $(1) FAILED: see fuzz/last-$(1).log"; exit 1; }
	@grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done)' fuzz/last-$(1).log || true

endef

fuzz-smoke: fuzz-seed fuzz-build
	$(foreach t,$(FUZZ_TARGETS),$(call fuzz_run,$(t),$(FUZZ_SMOKE_SECONDS)))

fuzz: fuzz-seed fuzz-build
	$(foreach t,$(FUZZ_TARGETS),$(call fuzz_run,$(t),$(FUZZ_SECONDS)))
