#!/usr/bin/env bash
# `make test-kernels`: boots every kernel of tests/kernels/kernels.txt in a
# VM (virtme-ng: the guest sees the host's files read-only, with a
# writable overlay) and runs the kernel smoke suite inside (smoke.sh), then
# asserts its results on the host (check.py). Prints per kernel the
# verifier's instruction counts and the agent's start-up time.
#   AGENT=path        the agent binary (default target/release/ebpf-profiler)
#   VM_ACCEL=kvm|tcg  skip the KVM probe (default: KVM if a guest boots on it)
#   SMOKE_SECONDS=N   how long the agent profiles in each VM (default 20)
# Under CI=true a missing tool, a failed download or a VM that does not
# come up fails like a failed assertion.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
agent="${AGENT:-$repo/target/release/ebpf-profiler}"
cache="${KERNEL_CACHE:-/var/cache/ebpf-profiler-kernels}"
seconds="${SMOKE_SECONDS:-20}"
[ -x "$agent" ] || { echo "test-kernels: no agent at $agent (make agent)" >&2; exit 1; }

"$repo/scripts/vm/install-vm-deps.sh"
# Under target/: the guest does not see files created under the host's
# /var/cache (its /var is an overlay), it sees the repo.
run="${KERNEL_RUN_DIR:-$repo/target/test-kernels}"
rm -rf "$run" && mkdir -p "$run/work" "$run/out"
# A failed download fails the run (and so CI): no kernel is skipped.
"$repo/scripts/vm/fetch-kernels.sh" >"$run/kernels"
mapfile -t kernels <"$run/kernels"
[ ${#kernels[@]} -gt 0 ] || { echo "test-kernels: no kernel in the list" >&2; exit 1; }
"$repo/tests/kernels/build-workloads.sh" "$run/work" >&2

kimg_of() { echo "$cache/root/$1/boot/vmlinuz-$1"; }

# Nested KVM can be present and still not run a guest (it hangs before
# the kernel's first message on some hosts): boot the first kernel bare
# and look for its banner.
accel="${VM_ACCEL:-}"
if [ -z "$accel" ]; then
  accel=tcg
  if [ -w /dev/kvm ]; then
    probe="$run/kvm-probe.log"
    timeout 20 qemu-system-x86_64 -machine accel=kvm -cpu host -m 512M -nographic -no-reboot \
      -kernel "$(kimg_of "${kernels[0]%% *}")" -append "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1" \
      >"$probe" 2>&1 </dev/null || true
    grep -aq "Linux version" "$probe" && accel=kvm
  fi
fi
echo "test-kernels: ${#kernels[@]} kernels, accelerator $accel" >&2
vng_accel=()
[ "$accel" = kvm ] || vng_accel=(--disable-kvm)

failed=()
for line in "${kernels[@]}"; do
  version="${line%% *}" expectation="${line#* }"
  out="$run/out/$version"
  echo "== kernel $version ($expectation)"
  start=$(date +%s)
  # Inside: the suite writes its results to the shared, writable $run/out.
  # vng's exit code is not the suite's when virtme falls back to the
  # console for the script (it does with Debian's modular kernels): the
  # results in $out decide, and a VM that never ran the suite leaves none.
  # A guest that dies before the suite starts (no $out/uname: an emulated
  # boot has panicked in early boot here, before any of our code ran) is
  # booted once more, and says so; a suite that started is never re-run.
  for boot in 1 2; do
    vng_rc=0
    timeout 900 vng --run "$(kimg_of "$version")" --disable-microvm "${vng_accel[@]}" \
      --memory 3G --cpus 2 --rwdir="$run/out" --verbose \
      --exec "$repo/tests/kernels/smoke.sh $agent $run/work $out $seconds" \
      >"$run/out/$version.console" 2>&1 </dev/null || vng_rc=$?
    echo "  (VM ran $(( $(date +%s) - start )) s; vng exit code $vng_rc)"
    [ -s "$out/uname" ] && break
    if [ "$boot" = 1 ]; then
      echo "  the guest died before the suite started; its console ends:"
      tr -d '\r' <"$run/out/$version.console" | tail -n 15 | sed 's/^/    /'
      echo "  booting $version once more"
    fi
  done
  if ! python3 "$repo/tests/kernels/check.py" "$out" "$expectation"; then
    failed+=("$version")
    echo "---- the end of the VM's console ----"
    tr -d '\r' <"$run/out/$version.console" | tail -c 6000
  fi
done

python3 "$repo/tests/kernels/table.py" "$run/out" "${kernels[@]%% *}"
passed=$(( ${#kernels[@]} - ${#failed[@]} ))
echo "test-kernels: ${passed} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ] || { echo "test-kernels: failed on ${failed[*]}" >&2; exit 1; }
