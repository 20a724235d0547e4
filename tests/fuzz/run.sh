#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for FUZZ_SECONDS
# (default 60) on a copy of its seed corpus in /tmp (the committed corpus is
# never grown). Exits non-zero when a target crashes or breaks an invariant;
# the reproducer is left in $FUZZ_ARTIFACTS (default /tmp/td-fuzz-artifacts).
#
#   tests/fuzz/run.sh                    # every target, 60 s each
#   FUZZ_SECONDS=180 tests/fuzz/run.sh fuzz_config
#
# Environment: FUZZ_SECONDS, FUZZ_BUILD (default build-fuzz), FUZZ_ARTIFACTS,
# CC (default clang), FUZZ_ARGS (extra libFuzzer flags, e.g. -jobs=4).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
seconds=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD:-$root/build-fuzz}
artifacts=${FUZZ_ARTIFACTS:-/tmp/td-fuzz-artifacts}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_safetensors fuzz_torch fuzz_ct2 fuzz_config fuzz_spm_model fuzz_spm_encode
                                      fuzz_request fuzz_route fuzz_html fuzz_office fuzz_po fuzz_markdown)

cc=${CC:-clang}
if ! command -v "$cc" >/dev/null; then
  echo "run.sh: $cc not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
# -Werror as every build: the tree builds warning-free with clang too (the
# printf-like helpers carry format attributes).
CC=$cc cmake -S "$root" -B "$build" -DTD_FUZZ=ON -DTD_BUILD_TESTS=OFF -DTD_CUDA=OFF >/dev/null
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)"

work=$(mktemp -d /tmp/td-fuzz-corpus.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$artifacts"

status=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  mkdir -p "$work/$name" "$artifacts/$name"
  cp "$root/tests/fuzz/corpus/$name/"* "$work/$name/"
  echo "== $t: ${seconds}s, corpus copy in $work/$name"
  # ASan: keep leak checks on; libFuzzer reports a leak as a crash.
  # shellcheck disable=SC2086
  if ! UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
       "$build/tests/fuzz/$t" -max_total_time="$seconds" -print_final_stats=1 \
       $( [ -f "$root/tests/fuzz/$name.dict" ] && echo "-dict=$root/tests/fuzz/$name.dict" ) -artifact_prefix="$artifacts/$name/" \
       ${FUZZ_ARGS:-} "$work/$name"; then
    echo "== $t: FAILED, reproducer in $artifacts/$name/ (rerun: $build/tests/fuzz/$t FILE)" >&2
    status=1
  fi
done
exit $status
