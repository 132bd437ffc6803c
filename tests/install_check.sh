#!/usr/bin/env bash
# install_check.sh BUILD_DIR SOURCE_DIR CMAKE CC — installs BUILD_DIR into a
# temporary prefix and builds examples/mlp.c against the installed rlx twice:
# through find_package(rlx) (shared and static targets) and through
# `pkg-config --cflags --libs rlx`; every program built must run and agree
# with its reference. Also checks the installed files and the soname.
set -euo pipefail
build=$1 src=$2 cmake=$3 cc=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" >/dev/null
for f in include/rlx.h lib/librlx.a lib/librlx.so bin/rlx lib/cmake/rlx/rlxConfig.cmake \
         lib/cmake/rlx/rlxConfigVersion.cmake lib/cmake/rlx/rlxTargets.cmake lib/pkgconfig/rlx.pc; do
  [ -e "$prefix/$f" ] || { echo "install_check: $f missing under the prefix"; exit 1; }
done
version=$("$prefix/bin/rlx" --version | head -n 1)
soname=$(readelf -d "$prefix/lib/librlx.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
case "$soname" in
  librlx.so.[0-9]*) [ -e "$prefix/lib/$soname" ] || { echo "install_check: $soname not installed"; exit 1; } ;;
  *) echo "install_check: librlx.so has no versioned soname ('$soname')"; exit 1 ;;
esac
echo "install_check: $version, soname $soname"

# find_package(rlx): rlx::rlx and rlx::rlx_static.
"$cmake" -S "$src/examples" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" >/dev/null
"$cmake" --build "$tmp/cmake" >/dev/null
"$tmp/cmake/mlp"
"$tmp/cmake/mlp_static"
if grep -q librlx <<<"$(ldd "$tmp/cmake/mlp_static")"; then
  echo "install_check: mlp_static links librlx.so"; exit 1
fi

# pkg-config, shared and static.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
"$cc" -o "$tmp/mlp_pc" "$src/examples/mlp.c" $(pkg-config --cflags --libs rlx) -lm
LD_LIBRARY_PATH=$prefix/lib "$tmp/mlp_pc"
# ldd's output is read whole first: grep -q ending the pipe early would fail it under pipefail.
deps=$(LD_LIBRARY_PATH=$prefix/lib ldd "$tmp/mlp_pc")
grep -q "$prefix/lib/$soname" <<<"$deps" || {
  echo "install_check: mlp_pc does not load the installed $soname"; echo "$deps"; exit 1; }
# shellcheck disable=SC2046
"$cc" -o "$tmp/mlp_pc_static" "$src/examples/mlp.c" $(pkg-config --cflags rlx) \
  "$prefix/lib/librlx.a" $(pkg-config --static --libs rlx | sed -E 's/(^| )-lrlx( |$)/ /')
"$tmp/mlp_pc_static"
echo "install_check: find_package and pkg-config builds pass"
