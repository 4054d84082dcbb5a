#!/usr/bin/env bash
# Fails if any C++ source of the project differs from its clang-format form (.clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -co --exclude-standard -- '*.h' '*.cc' | grep -v '^build')
clang-format --dry-run --Werror "${files[@]}"
echo "format: ${#files[@]} files clean"
