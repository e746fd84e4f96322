#!/bin/bash
# Builds a Debian root file system holding the runtimes of one suite
# (trixie | sid), for the runtime version matrix (mk/runtimes.mk): the
# chain tests start their interpreter in it with chroot while the agent
# profiles from the host. Cached in /var/cache/ebpf-profiler-runtimes/SUITE
# (never in the repo); rebuilt only when its stamp .ready is missing. Root.
set -euo pipefail

suite=${1:?usage: rootfs.sh trixie|sid}
case $suite in trixie | sid) ;; *) echo "unknown suite $suite" >&2; exit 2 ;; esac
cache=${EP_RUNTIME_CACHE:-/var/cache/ebpf-profiler-runtimes}
root=$cache/$suite
mirror=http://deb.debian.org/debian
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

[ -f "$root/.ready" ] && exit 0

# The runtimes the chain tests cover; a package the suite lacks is skipped
# and recorded in versions.txt (missing: ...).
packages=(python3 ruby php-cli perl nodejs erlang-base elixir)
case $suite in
trixie) packages+=(openjdk-21-jdk-headless openjdk-25-jdk-headless) ;;
sid) packages+=(python3.15 openjdk-25-jdk-headless openjdk-26-jdk-headless) ;;
esac

# Two roots are built at once (.ci/run): wait for the other's apt.
command -v debootstrap >/dev/null || apt-get -o DPkg::Lock::Timeout=600 install -y debootstrap

start=$(date +%s)
# A root without its stamp may be half built: start again, never with
# /proc still mounted in it.
if [ -e "$root" ]; then
	mountpoint -q "$root/proc" && umount "$root/proc"
	rm -rf --one-file-system "$root"
fi
mkdir -p "$cache"
debootstrap --variant=minbase --keyring="$keyring" "$suite" "$root" "$mirror"

# sid's Release files may outlive their Valid-Until on a cached mirror.
if [ "$suite" = sid ]; then
	echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99no-check-valid-until"
fi
# No service starts in the root (erlang's epmd, ...).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"

# /proc only while apt runs (the JDK's postinst reads it).
mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT
in_root() { chroot "$root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"; }
in_root apt-get update -q
available=() missing=()
for p in "${packages[@]}"; do
	# sed reads all of apt-cache's output (grep -q would end the pipe early).
	candidate=$(in_root apt-cache policy "$p" | sed -n 's/^ *Candidate: //p')
	if [ -n "$candidate" ] && [ "$candidate" != "(none)" ]; then
		available+=("$p")
	else
		missing+=("$p")
	fi
done
in_root apt-get install -y -q --no-install-recommends "${available[@]}"
in_root apt-get clean
umount "$root/proc"
trap - EXIT

{
	# The runtimes' own packages too: python3.13, ruby3.3, php8.4-cli, libnode115, ...
	in_root dpkg-query -W -f '${Package} ${Version}\n' |
		grep -E '^(python3|python3\.[0-9]+|ruby|ruby[0-9.]+|php-cli|php[0-9.]+-cli|perl|nodejs|libnode[0-9]+|erlang-base|elixir|openjdk-[0-9]+-jdk-headless) '
	[ ${#missing[@]} -eq 0 ] || echo "missing: ${missing[*]}"
} >"$root/versions.txt"
seconds=$(($(date +%s) - start))
size=$(du -sh --one-file-system "$root" | cut -f1)
echo "built $suite in ${seconds}s, $size" | tee "$root/build.txt"
touch "$root/.ready"
