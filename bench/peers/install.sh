#!/usr/bin/env bash
# Install the benchmark peers into their own virtual environments under bench/.peers/
# (git-ignored; never part of Cairn's dependencies or CI). Idempotent: a venv whose pinned
# packages already import is left alone. Usage: bash bench/peers/install.sh [pyflink|spark|bytewax ...]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)/.peers"
python="${PYTHON:-python3}"
mkdir -p "$root"

# name | pip requirements | import check (exits 0 when the venv is complete)
declare -A reqs=(
  [pyflink]="apache-flink==2.3.0"
  [spark]="pyspark==4.3.0 protobuf pandas<3 pyarrow"
  [bytewax]="bytewax==0.21.1"
)
declare -A checks=(
  [pyflink]="import importlib.metadata as m, pyflink; assert m.version('apache-flink') == '2.3.0'"
  [spark]="import importlib.metadata as m, pyspark, google.protobuf, pandas, pyarrow; assert pyspark.__version__ == '4.3.0' and int(pandas.__version__.split('.')[0]) < 3"
  [bytewax]="import importlib.metadata as m, bytewax; assert m.version('bytewax') == '0.21.1'"
)

if ! command -v java >/dev/null 2>&1; then
  echo "warning: no 'java' on PATH; PyFlink and Spark need Java 17" >&2
fi

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(pyflink spark bytewax)

for name in "${targets[@]}"; do
  if [ -z "${reqs[$name]+x}" ]; then
    echo "unknown peer '$name' (expected pyflink, spark or bytewax)" >&2
    exit 2
  fi
  venv="$root/$name"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "${checks[$name]}" 2>/dev/null; then
    echo "$name: already installed in $venv ($("$venv/bin/python" --version))"
    continue
  fi
  if [ ! -x "$venv/bin/python" ]; then
    echo "$name: creating venv $venv"
    "$python" -m venv "$venv"
  fi
  echo "$name: pip install ${reqs[$name]}"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  # shellcheck disable=SC2086  # the requirement list is meant to split into words
  "$venv/bin/python" -m pip install --quiet --upgrade ${reqs[$name]}
  "$venv/bin/python" -c "${checks[$name]}"
  echo "$name: installed in $venv"
done
