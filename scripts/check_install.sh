#!/usr/bin/env bash
# Installs a built neardup into a scratch prefix and builds examples/consumer against it with
# find_package(neardup), then runs the consumer. Usage: check_install.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:?usage: check_install.sh BUILD_DIR}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build_dir" --prefix "$scratch/prefix" >/dev/null
cmake -S "$root/examples/consumer" -B "$scratch/consumer-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/consumer-build" >/dev/null
"$scratch/consumer-build/consumer"
"$scratch/consumer-build/service_consumer"
# Hidden visibility: the shared libraries export the public API (NEARDUP_EXPORT) and nothing of
# the internals (src/: the index segments, the store's files, the JSON writer, ...).
for library in "$scratch"/prefix/lib*/libneardup.so "$scratch"/prefix/lib*/libneardup_service.so; do
  exported=$(nm -D -C --defined-only "$library")
  # The members of the pimpl classes' private halves (NEARDUP_HIDDEN) and the transport's Asio
  # globals (BOOST_ASIO_DISABLE_VISIBILITY).
  for internal in 'neardup::index::' 'neardup::store::' 'neardup::JsonWriter' 'neardup::ParallelFor' \
    '^[0-9a-f]* [A-Za-z] neardup::\([A-Za-z]*::\)*Impl::' 'boost::asio::'; do
    if grep -q "$internal" <<<"$exported"; then
      echo "install: $library exports internal symbols ($internal)" >&2
      exit 1
    fi
  done
  # cmake/exports.map: nothing but neardup's own names (no std:: or boost:: template instances).
  foreign=$(cut -c20- <<<"$exported" |
    grep -v '^\(\(typeinfo\|typeinfo name\|vtable\|VTT\|guard variable\) for \|\(non-\)\?virtual thunk to \)\?neardup::' || true)
  if [ -n "$foreign" ]; then
    echo "install: $library exports symbols outside namespace neardup (cmake/exports.map):" >&2
    head -n 5 <<<"$foreign" >&2
    exit 1
  fi
done
# Every installed declaration that needs a symbol carries NEARDUP_EXPORT and is exported.
/usr/bin/python3 "$root/scripts/check_exports.py" "$scratch/prefix/include" \
  "$scratch"/prefix/lib*/libneardup.so "$scratch"/prefix/lib*/libneardup_service.so
grep -q 'neardup::Fingerprinter::Create' <<<"$(nm -D -C --defined-only "$scratch"/prefix/lib*/libneardup.so)"
grep -q 'neardup::service::Server::Create' <<<"$(nm -D -C --defined-only "$scratch"/prefix/lib*/libneardup_service.so)"
test -x "$scratch/prefix/bin/neardup"
"$scratch/prefix/bin/neardup" --help >/dev/null
# The completions and the man page generated from the CLI definitions are installed too.
test -s "$scratch/prefix/share/bash-completion/completions/neardup"
test -s "$scratch/prefix/share/zsh/site-functions/_neardup"
test -s "$scratch/prefix/share/man/man1/neardup.1"
echo "install: find_package(neardup) consumers of neardup::neardup and neardup::service built and ran; only the public API is exported; completions and man page installed"
# The Python package (when built): importable from the scratch prefix alone, outside the tree.
if ls "$build_dir"/python/neardup/_neardup*.so >/dev/null 2>&1; then
  site=$(dirname "$(find "$scratch/prefix" -path '*-packages/neardup/__init__.py' | head -n 1)")
  (cd / && PYTHONPATH="$(dirname "$site")" /usr/bin/python3 -c \
    'import neardup, sys; neardup.Fingerprinter().fingerprint("installed"); sys.exit(not neardup.__file__.startswith(sys.argv[1]))' \
    "$scratch/prefix")
  echo "install: the Python package imports and fingerprints from the installed prefix"
fi
