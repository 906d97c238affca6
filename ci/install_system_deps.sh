#!/usr/bin/env bash
# System (Debian) packages the native build uses: FFTW3 for ember.fft. Called by .ci/run and
# by the README's install steps. Best effort: without apt (or root) it only warns, and the
# build still succeeds without ember.fft (which then raises a RuntimeError naming FFTW3).
set -uo pipefail
pkgs=(libfftw3-dev)
if dpkg-query -W -f='${Status}' "${pkgs[@]}" 2>/dev/null | grep -q "install ok installed"; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_system_deps: apt-get not found; ember.fft will be unavailable (needs ${pkgs[*]})" >&2
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else
    echo "install_system_deps: not root and no sudo; ember.fft will be unavailable (needs ${pkgs[*]})" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}"; }; then
  echo "install_system_deps: could not install ${pkgs[*]}; ember.fft will be unavailable" >&2
fi
exit 0
