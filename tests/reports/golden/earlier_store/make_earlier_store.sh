#!/usr/bin/env bash
# A store written by an earlier Tandem, kept so that every later one is tested on reading
# it (tests/reports/earlier_store_test.cpp): runs campaign.yaml with the given `tandem`
# (built at the earlier revision), then keeps, in this folder,
#   store.sql   the store as `sqlite3 .dump` writes it (text: reviewable, diffable)
#   report.md   what that Tandem's `tandem report` rendered from it
#   gate.txt    what its `tandem gate` printed (and its exit status, on the last line)
# with the store's path replaced by STORE. The arms run the tandem-rt of ../../../../build.
#
#   tests/reports/golden/earlier_store/make_earlier_store.sh /path/to/earlier/build/bin/tandem
set -euo pipefail
tandem=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$here"
rm -f store.db
"$tandem" run campaign.yaml
mv store.db "$work/store.db"
rm -rf store-logs
sqlite3 "$work/store.db" .dump >store.sql
# The report and gate read a copy loaded from the dump, as the test does.
sqlite3 "$work/loaded.db" <store.sql
"$tandem" report "$work/loaded.db" | sed "s|$work/loaded.db|STORE|g" >report.md
set +e
gate=$("$tandem" gate "$work/loaded.db" 2>&1)
status=$?
set -e
printf '%s\nexit status %d\n' "$gate" "$status" | sed "s|$work/loaded.db|STORE|g" >gate.txt
echo "wrote store.sql ($(wc -c <store.sql) bytes), report.md, gate.txt with $("$tandem" --version 2>/dev/null || echo "$tandem")"
