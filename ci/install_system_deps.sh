#!/usr/bin/env bash
# System (Debian) packages for OPTIONAL extras of the native build. ember needs none: ember.fft
# runs pocketfft from the SciPy/NumPy wheels. Called by .ci/run and the README; by default it
# does nothing. EMBER_SYSTEM_EXTRAS=fftw installs libfftw3-dev, which a build configured with
# -DEMBER_USE_FFTW=ON links as an FFT accelerator (GPL: see docs/packaging.md). Best effort:
# without apt (or root) it only warns.
set -uo pipefail
pkgs=()
case ",${EMBER_SYSTEM_EXTRAS:-}," in
  *,fftw,*) pkgs+=(libfftw3-dev) ;;
esac
if [ ${#pkgs[@]} -eq 0 ]; then
  exit 0
fi
if dpkg-query -W -f='${Status}' "${pkgs[@]}" 2>/dev/null | grep -q "install ok installed"; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_system_deps: apt-get not found; skipping the optional ${pkgs[*]}" >&2
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else
    echo "install_system_deps: not root and no sudo; skipping the optional ${pkgs[*]}" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}"; }; then
  echo "install_system_deps: could not install the optional ${pkgs[*]}" >&2
fi
exit 0
