#!/usr/bin/env bash
# Runs the questions of docs/dataset.md on Apache Spark (local mode) over a `tally export`
# dataset and compares every answer with DuckDB's; prints one line per question and exits 1 if
# any differs. Not part of CI: it needs pyspark from PyPI (about 300 MB, installed into
# target/sparkenv with duckdb) and a Java runtime (Debian's default-jre-headless, installed
# when `java` is missing).
#
#   scripts/fleet-spark.sh DATASET [BUILD]    BUILD: a build key (default: the one with most runs)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/fleet-spark.sh DATASET [BUILD]" >&2; exit 2; }
ds=$(realpath "$1")
[ -d "$ds/runs" ] || { echo "fleet-spark: $1 is not a tally export dataset (no runs/)" >&2; exit 2; }
if ! command -v java >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends default-jre-headless
fi
venv=target/sparkenv
if [ ! -x "$venv/bin/python3" ] || ! "$venv/bin/python3" -c 'import pyspark, duckdb' 2>/dev/null; then
  echo "fleet-spark: installing pyspark and duckdb in $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check pyspark "duckdb==2.0.1"
fi
exec "$venv/bin/python3" - "$ds" "${2:-}" <<'EOF'
import decimal, os, sys, time
import duckdb
from pyspark.sql import SparkSession

ds, build = sys.argv[1], sys.argv[2]
tables = sorted(t for t in os.listdir(ds) if os.path.isdir(os.path.join(ds, t)))
con = duckdb.connect()
for t in tables:
    con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{ds}/{t}/*/*.parquet', hive_partitioning = true)")
if not build:
    build = con.execute("SELECT build FROM runs GROUP BY build ORDER BY count(*) DESC, build LIMIT 1").fetchall()[0][0]

spark = (SparkSession.builder.master("local[*]").appName("tally-fleet")
         # Build keys are hex: all digits now and then, which must stay strings.
         .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
for t in tables:
    spark.read.option("basePath", f"{ds}/{t}").parquet(f"{ds}/{t}").createOrReplaceTempView(t)

# The questions of docs/dataset.md, in SQL both engines take.
QUERIES = {
    "lines never run": f"""
        SELECT l.file, l.line FROM lines l
        LEFT JOIN (SELECT DISTINCT file, line FROM line_totals WHERE build = '{build}') c
          ON l.file = c.file AND l.line = c.line
        WHERE l.build = '{build}' AND c.file IS NULL""",
    "hottest functions per build": """
        SELECT build, name, executions FROM (
          SELECT t.build, f.name, sum(t.executions) AS executions,
                 row_number() OVER (PARTITION BY t.build ORDER BY sum(t.executions) DESC, f.name) AS rank
          FROM function_totals t JOIN functions f ON t.build = f.build AND t.function = f.function
          WHERE t.executions IS NOT NULL
          GROUP BY t.build, f.function, f.name)
        WHERE rank <= 10""",
    "runs and block executions per build": """
        SELECT r.build, count(DISTINCT r.run), sum(c.executions)
        FROM runs r LEFT JOIN function_counts c ON r.build = c.build AND r.run = c.run
        GROUP BY r.build""",
    "lines each run covered, for one file": f"""
        SELECT c.run, count(*) FROM line_counts c
        WHERE c.build = '{build}' AND c.file = (SELECT min(file) FROM lines WHERE build = '{build}')
        GROUP BY c.run""",
}


def norm(rows):
    out = []
    for r in rows:
        out.append(tuple(int(v) if isinstance(v, decimal.Decimal) else v for v in r))
    return sorted(out, key=repr)


failed = 0
print(f"dataset {ds}, build {build}: {len(tables)} tables")
for name, q in QUERIES.items():
    t = time.perf_counter()
    d = norm(con.execute(q).fetchall())
    td = time.perf_counter() - t
    t = time.perf_counter()
    s = norm(tuple(r) for r in spark.sql(q).collect())
    ts = time.perf_counter() - t
    same = d == s
    failed += not same
    print(f"{name}: {len(d)} rows; DuckDB {td:.2f} s, Spark {ts:.2f} s; {'same answer' if same else 'DIFFERENT'}")
spark.stop()
sys.exit(1 if failed else 0)
EOF
