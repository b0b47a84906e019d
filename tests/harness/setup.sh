#!/bin/bash
# Prepare a Debian 12 machine (as root) to run nodecheck's tests and demo. Idempotent and quiet:
#  * apt packages, only if something is missing: openssh-server pdsh iproute2 util-linux procps dash
#    python3-venv python3-numpy slurm-wlm munge (and for the tests, NC_SETUP_BROWSER=1: chromium
#    chromium-driver fonts-liberation); and /dev/fuse (modprobe fuse) for the nodes' /mnt/shared
#    (--no-install-recommends; apt is kept from starting the system sshd while installing)
#  * /run/sshd (sshd's privilege-separation dir)
#  * .venv (python3 -m venv; Debian's /usr/bin/python3 preferred, so the venv also works "on" a
#    simulated node, where /root is hidden) with `pip install -e '.[test]'`, re-run only when
#    pyproject.toml changes.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nc_require_root "tests/harness/setup.sh"
cd "$NC_REPO_ROOT"
export DEBIAN_FRONTEND=noninteractive

pkgs=()
[ -x /usr/sbin/sshd ] || pkgs+=(openssh-server)
command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || pkgs+=(openssh-client)
command -v pdsh >/dev/null || pkgs+=(pdsh)
command -v ip >/dev/null || pkgs+=(iproute2)
command -v unshare >/dev/null && command -v nsenter >/dev/null && command -v setsid >/dev/null &&
  command -v flock >/dev/null && command -v prlimit >/dev/null && command -v fallocate >/dev/null &&
  command -v findmnt >/dev/null || pkgs+=(util-linux)   # prlimit, fallocate, findmnt: the node checks' faults
command -v pgrep >/dev/null && command -v ps >/dev/null || pkgs+=(procps)   # the RoCE flap's refusal checks
command -v dash >/dev/null || pkgs+=(dash)             # /bin/sh of the nodes; the pair-test script tests
# the nodes' python3 runs the GPU benchmark probe over the fake CuPy, whose math is NumPy's
{ [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; } || pkgs+=(python3-numpy)
# real Slurm on the simulated nodes (slurm_cluster.sh); munge is Slurm 22.05's only authentication
for b in slurmctld slurmd scontrol sinfo sbatch munged munge; do
  [ -x "/usr/sbin/$b" ] || command -v "$b" >/dev/null || { pkgs+=(slurm-wlm munge); break; }
done
# the tests (run_all.sh sets NC_SETUP_BROWSER=1; the demo does not need it) load report.html in a real
# browser: Debian's chromium, driven through its own chromium-driver (the same version by
# construction); fonts-liberation (a Recommends) so the screenshot's text is text
if [ "${NC_SETUP_BROWSER:-0}" = 1 ]; then
  { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && [ -d /usr/share/fonts/truetype/liberation ]; } ||
    pkgs+=(chromium chromium-driver fonts-liberation)
fi
if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=$(command -v python3 || true); fi
if [ ! -x .venv/bin/python ]; then
  [ -n "$PY" ] || pkgs+=(python3)
  { [ -n "$PY" ] && "$PY" -c 'import ensurepip, venv' 2>/dev/null; } || pkgs+=(python3-venv)
fi
if ((${#pkgs[@]})); then
  echo "setup: apt-get install ${pkgs[*]}"
  cleanup_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then   # no daemon may start from a package's postinst
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    cleanup_policy=1
  fi
  rc=0
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}"; } \
    >/tmp/nodecheck-apt.log 2>&1 || rc=$?
  [ -z "$cleanup_policy" ] || rm -f /usr/sbin/policy-rc.d
  ((rc == 0)) || { tail -n 20 /tmp/nodecheck-apt.log >&2; nc_die "apt-get failed (log: /tmp/nodecheck-apt.log)"; }
  [ -x /usr/bin/python3 ] && PY=/usr/bin/python3 || PY=$(command -v python3)
fi
mkdir -p /run/sshd
# /mnt/shared on every simulated node is a FUSE mount (tests/fakes/hangfs.py speaks the protocol itself:
# no libfuse, no fusermount); it needs the kernel's fuse module and /dev/fuse
[ -c /dev/fuse ] || modprobe fuse 2>/dev/null || true
[ -c /dev/fuse ] || echo "setup: warning: /dev/fuse is missing (modprobe fuse; in a container: --device /dev/fuse):" \
  "the simulated nodes get no /mnt/shared, and the node-check tests fail" >&2

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY"
  "$PY" -m venv .venv
fi
stamp=.venv/.nodecheck-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! .venv/bin/python -I -c 'import nodecheck, pytest' 2>/dev/null; then
  echo "setup: pip install -e '.[test]'"
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' >/tmp/nodecheck-pip.log 2>&1 \
    || { tail -n 20 /tmp/nodecheck-pip.log >&2; nc_die "pip install failed (log: /tmp/nodecheck-pip.log)"; }
  echo "$want" > "$stamp"
fi
