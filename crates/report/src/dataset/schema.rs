//! The dataset's tables and columns: one [`TableSpec`] per table, the single source of the
//! schema that [`super::table::Table`] builds and docs/dataset.md describes
//! ([`markdown`], compared with the document by a test).

/// Version of the schema, in the `builds` table; raised when a column comes, goes or changes
/// meaning (4: `runs.delta` and `runs.snapshot`; 5: `line_totals` and `function_totals`).
pub const SCHEMA_VERSION: u32 = 5;

/// A column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Parquet INT32 (unsigned), DuckDB `UINTEGER`.
    U32,
    /// Parquet INT64 (unsigned), DuckDB `UBIGINT`.
    U64,
    /// UTF-8 string, DuckDB `VARCHAR`.
    Str,
    /// DuckDB `BOOLEAN`.
    Bool,
    /// Bytes, DuckDB `BLOB`.
    Bytes,
    /// A map of string keys to string values, DuckDB `MAP(VARCHAR, VARCHAR)`.
    Labels,
    /// A list of unsigned 32-bit integers, DuckDB `UINTEGER[]`.
    U32List,
    /// A list of strings, DuckDB `VARCHAR[]`.
    StrList,
    /// A list of booleans, DuckDB `BOOLEAN[]`.
    BoolList,
}

/// One column.
#[derive(Debug)]
pub struct ColumnSpec {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// May it be NULL?
    pub nullable: bool,
    /// What it holds.
    pub doc: &'static str,
}

/// One table.
#[derive(Debug)]
pub struct TableSpec {
    /// Its directory under the dataset's root.
    pub name: &'static str,
    /// What a row is.
    pub doc: &'static str,
    /// Its columns (besides `build`, the Hive partition every table has).
    pub columns: &'static [ColumnSpec],
}

const fn col(name: &'static str, kind: Kind, doc: &'static str) -> ColumnSpec {
    ColumnSpec {
        name,
        kind,
        nullable: false,
        doc,
    }
}

const fn opt(name: &'static str, kind: Kind, doc: &'static str) -> ColumnSpec {
    ColumnSpec {
        name,
        kind,
        nullable: true,
        doc,
    }
}

const RUN: ColumnSpec = col("run", Kind::Str, "the run (`runs.run`)");
const FUNCTION: ColumnSpec = col(
    "function",
    Kind::U32,
    "the function (`functions.function` of the same build)",
);

/// A build: the modules (object files) a run held, identified by their hashes and the
/// program's build id.
pub const BUILDS: TableSpec = TableSpec {
    name: "builds",
    doc: "one row per build (written once, by the first export that meets it)",
    columns: &[
        col("schema", Kind::U32, "the dataset schema version"),
        col(
            "program",
            Kind::Str,
            "the executable's path in the first profile exported of the build",
        ),
        opt(
            "build_id",
            Kind::Str,
            "the program's build id in hex (GNU build-id note, or the hash of its module hashes)",
        ),
        col("build_id_kind", Kind::Str, "`gnu`, `modules` or `none`"),
        col(
            "modes",
            Kind::Str,
            "the counting modes of its modules, comma-separated",
        ),
        col("modules", Kind::U32, "instrumented modules"),
        col("functions", Kind::U32, "rows of `functions`"),
    ],
};

/// An instrumented module of a build, with its metadata: with [`COUNTERS`] and
/// [`PATH_ENTRIES`], what rebuilds the merged profile of any runs of the build.
pub const MODULES: TableSpec = TableSpec {
    name: "modules",
    doc: "one row per instrumented module (object file) of the build, with the metadata its profiles carry; a build made with `--tally-oracle` lists its same-run oracle modules too (mode `edges-naive`), so that `tally check` reads the build back",
    columns: &[
        col("module", Kind::U32, "its number in the build"),
        col("hash", Kind::U64, "the hash of its metadata"),
        col("source", Kind::Str, "its source file"),
        col("mode", Kind::Str, "its counting mode"),
        col("counters", Kind::U32, "its number of counters"),
        col("meta", Kind::Bytes, "its metadata, as the profile holds it (docs/design/profile.md)"),
    ],
};

/// A function of a build.
pub const FUNCTIONS: TableSpec = TableSpec {
    name: "functions",
    doc: "one row per instrumented function of the build (linkonce copies of one function are one row)",
    columns: &[
        col("function", Kind::U32, "its number in the build (by module, name and graph hash)"),
        col("name", Kind::Str, "linkage name"),
        col("demangled", Kind::Str, "demangled name (the linkage name for C)"),
        col("module", Kind::Str, "source file of its module"),
        opt("file", Kind::Str, "source file of its definition"),
        col("line", Kind::U32, "line of its definition (0: unknown)"),
        col("mode", Kind::Str, "counting mode of its module"),
        col("cfg_hash", Kind::U64, "hash of its control-flow graph"),
        col("blocks", Kind::U32, "rows of `blocks`"),
        col("edges", Kind::U32, "rows of `edges`"),
    ],
};

/// A block of a function.
pub const BLOCKS: TableSpec = TableSpec {
    name: "blocks",
    doc: "one row per block of each function (the block ids of `tally report`)",
    columns: &[
        FUNCTION,
        col("block", Kind::U32, "block id"),
        opt(
            "file",
            Kind::Str,
            "source file of its first located instruction",
        ),
        col("line", Kind::U32, "its line (0: unknown)"),
        col(
            "inlined",
            Kind::StrList,
            "the inline stack of that instruction: the source functions whose inlined code it is, innermost first (empty: the function's own code)",
        ),
        col(
            "inlined_at",
            Kind::U32List,
            "the line of each of their calls (0: unknown)",
        ),
        col(
            "inlined_at_file",
            Kind::StrList,
            "the file of each of their calls (empty: unknown)",
        ),
    ],
};

/// An edge of a function.
pub const EDGES: TableSpec = TableSpec {
    name: "edges",
    doc: "one row per edge of each function's graph (the edge ids of `tally report`)",
    columns: &[
        FUNCTION,
        col("edge", Kind::U32, "edge id"),
        opt(
            "src",
            Kind::U32,
            "source block (NULL: the function's EXIT vertex)",
        ),
        opt("dst", Kind::U32, "target block (NULL: EXIT)"),
        col(
            "kind",
            Kind::Str,
            "`entry`, `flow`, `return`, `early-exit` or `reentry`",
        ),
    ],
};

/// A source line with code.
pub const LINES: TableSpec = TableSpec {
    name: "lines",
    doc: "one row per source line that has code in the build (the lines of `tally report --lines`)",
    columns: &[
        col("file", Kind::Str, "source file"),
        col("line", Kind::U32, "line number"),
    ],
};

/// A run: one exported profile.
pub const RUNS: TableSpec = TableSpec {
    name: "runs",
    doc: "one row per exported profile",
    columns: &[
        col("run", Kind::Str, "the run's id: a hash of the profile file's bytes (the same profile exported twice is one run)"),
        col("program", Kind::Str, "the executable's path as the profile names it"),
        col("pid", Kind::U64, "process id (0 for a merged profile)"),
        col("unfinished", Kind::Bool, "a continuous-mode profile of a process that did not exit"),
        col("raced", Kind::Bool, "code without atomic increments ran in a multi-threaded process: counts may have lost updates"),
        opt("signal", Kind::U32, "the fatal signal at which the profile was written"),
        col("delta", Kind::Bool, "a part of a process that took snapshots (`TALLY_SNAPSHOT_*`): its counts are those since the previous snapshot (since the start for snapshot 1), and the parts of a process add up to its profile; early exits are changes in waiting frames, so `edge_counts` has no early-exit rows for it, and its `counters` of early exits are two's complement (sums wrap)"),
        opt("snapshot", Kind::U32, "the part's snapshot number (1, 2, ...; `start_ns` is the previous snapshot's time); NULL for a profile written at an end"),
        opt("exit_status", Kind::U32, "the exit status as the parent sees it (the low 8 bits of what `exit`/`_exit` got or `main` returned); NULL when it ended otherwise (a signal, an `exec`) or for a merged profile"),
        opt("start_ns", Kind::U64, "when the run started: nanoseconds since the Unix epoch (`make_timestamp(start_ns // 1000)` in DuckDB); NULL for a merged profile or one written before container version 5"),
        opt("end_ns", Kind::U64, "when it wrote the profile, the same way"),
        opt("host", Kind::Str, "the host it ran on (`uname -n`)"),
        col("inexact", Kind::U32, "functions whose counts could not be recovered (rows of `inexact`)"),
        col("source", Kind::Str, "the profile file, as given to `tally export`"),
        col("labels", Kind::Labels, "`TALLY_LABELS=k=v,...` of the run and `--label KEY=VALUE` of the export (which wins for a key in both)"),
    ],
};

/// Calls and work of a function in a run.
pub const FUNCTION_COUNTS: TableSpec = TableSpec {
    name: "function_counts",
    doc: "per run, each function that ran (a count or event total above zero)",
    columns: &[
        RUN,
        FUNCTION,
        opt("entries", Kind::U64, "calls (`tally report`'s entry count; NULL where the mode leaves it undetermined: `events`)"),
        opt("executions", Kind::U64, "block executions (the sum of its block counts; NULL where the mode leaves some undetermined)"),
        opt("inclusive_events", Kind::U64, "events mode: events of its completed activations, callees included"),
        opt("exclusive_events", Kind::U64, "events mode: the same without the events of its completed calls"),
        opt("paths_lost", Kind::U64, "path mode: path increments the runtime lost for lack of memory (its `path_counts` are then a lower bound)"),
    ],
};

/// Block counts.
pub const BLOCK_COUNTS: TableSpec = TableSpec {
    name: "block_counts",
    doc: "per run, each block that ran, with its exact count (zero counts are omitted)",
    columns: &[
        RUN,
        FUNCTION,
        col("block", Kind::U32, "block id"),
        col("count", Kind::U64, "times the block ran"),
    ],
};

/// Edge counts.
pub const EDGE_COUNTS: TableSpec = TableSpec {
    name: "edge_counts",
    doc: "per run, each edge taken, with its exact count (zero counts are omitted)",
    columns: &[
        RUN,
        FUNCTION,
        col("edge", Kind::U32, "edge id"),
        col("count", Kind::U64, "times the edge was taken"),
    ],
};

/// Line counts.
pub const LINE_COUNTS: TableSpec = TableSpec {
    name: "line_counts",
    doc: "per run, each line that ran, with its count as `tally report --lines` gives it (zero counts are omitted)",
    columns: &[
        RUN,
        col("file", Kind::Str, "source file"),
        col("line", Kind::U32, "line number"),
        col("count", Kind::U64, "times control entered the line"),
    ],
};

const PART: ColumnSpec = col(
    "part",
    Kind::Str,
    "the part: `HASH` of its files' name `part-HASH.parquet` (the same in every fact table of the build; its runs are those of `runs/build=KEY/part-HASH.parquet`)",
);

/// Line counts summed over a part's runs.
pub const LINE_TOTALS: TableSpec = TableSpec {
    name: "line_totals",
    doc: "per part (the runs exported together in one file of `runs`), each line that ran in one of its runs, with the sum of its `line_counts` rows there: what a question about all the runs of a build reads instead of `line_counts` (a few rows per line, not one per run)",
    columns: &[
        PART,
        col("file", Kind::Str, "source file"),
        col("line", Kind::U32, "line number"),
        col("count", Kind::U64, "the sum of its `line_counts.count` over the part's runs"),
        col("runs", Kind::U32, "the part's runs in which it ran (its rows of `line_counts`)"),
    ],
};

/// Function counts summed over a part's runs.
pub const FUNCTION_TOTALS: TableSpec = TableSpec {
    name: "function_totals",
    doc: "per part, each function that ran in one of its runs, with the sums of the `entries` and `executions` of its `function_counts` rows there (events and lost path increments: `function_counts`)",
    columns: &[
        PART,
        FUNCTION,
        opt("entries", Kind::U64, "the sum of its `function_counts.entries` over the part's runs, NULLs left out as SQL's `SUM` leaves them (NULL where the mode leaves them undetermined, or where one run's rows of it pass 2^64 - 1)"),
        opt("executions", Kind::U64, "the sum of its `function_counts.executions` (NULL likewise)"),
        col("runs", Kind::U32, "the part's runs in which it ran (its rows of `function_counts`)"),
    ],
};

/// Path counts.
pub const PATH_COUNTS: TableSpec = TableSpec {
    name: "path_counts",
    doc: "path modes: per run, each executed path of each function and its count",
    columns: &[
        RUN,
        FUNCTION,
        col(
            "path",
            Kind::Str,
            "the path's number (decimal: numbers can exceed 64 bits)",
        ),
        col("count", Kind::U64, "times it ran"),
    ],
};

/// The executed paths spelled out.
pub const PATHS: TableSpec = TableSpec {
    name: "paths",
    doc: "path mode: each path of a function that some run of the build took, once per build, spelled out as `tally paths` shows it (written with the part of the first run that took it; join `path_counts` on `function` and `path`)",
    columns: &[
        FUNCTION,
        col("path", Kind::Str, "the path's number (as in `path_counts`)"),
        col("blocks", Kind::U32List, "its blocks in order (`blocks.block`)"),
        col("start", Kind::Str, "how it starts: `entry`, `back-edge`, `reentry` or `cut`"),
        col("end", Kind::Str, "how it ends: `return`, `early-exit`, `back-edge` or `cut`"),
    ],
};

/// Interprocedural path counts.
pub const IPATH_COUNTS: TableSpec = TableSpec {
    name: "ipath_counts",
    doc: "modes `ipath` and `ipath-piecewise`: per run, each executed interprocedural path of each module's set and its count (`tally paths` shows its steps)",
    columns: &[
        RUN,
        col("module", Kind::Str, "the source file of the module whose set numbers the path"),
        col("mode", Kind::Str, "`ipath` or `ipath-piecewise`"),
        col("path", Kind::Str, "the path's number in the set (decimal)"),
        col("count", Kind::U64, "times it ran"),
    ],
};

/// The executed interprocedural paths spelled out.
pub const IPATHS: TableSpec = TableSpec {
    name: "ipaths",
    doc: "modes `ipath` and `ipath-piecewise`: each interprocedural path that some run of the build took, once per build, its steps as `tally paths` spells them (parallel lists, one element per step; written with the part of the first run that took it; join `ipath_counts` on `module`, `mode` and `path`)",
    columns: &[
        col("module", Kind::Str, "the source file of the module whose set numbers the path"),
        col("mode", Kind::Str, "`ipath` or `ipath-piecewise`"),
        col("path", Kind::Str, "the path's number in the set (as in `ipath_counts`)"),
        col("start", Kind::Str, "how it starts: `entry`, `back-edge`, `cut` or `reentry`"),
        col("end", Kind::Str, "how it ends: `return`, `back-edge`, `cut` or `early-exit`"),
        col("context_steps", Kind::U32, "the leading steps that are its calling context (they ran with an earlier path)"),
        col("step_kinds", Kind::StrList, "each step's kind: `block`, `call`, `return`, `summary`, `restart`, `reentry`, `cut` or `early-exit`"),
        col("step_functions", Kind::StrList, "the function (symbol) of a block; the caller of a call, return or summary; empty for the markers"),
        col("step_blocks", Kind::U32List, "the block (`blocks.block`); the caller's block holding the call; 0 for the markers"),
        col("step_callees", Kind::StrList, "the callee of a call, return or summary (empty: unknown, or another kind)"),
        col("step_matched", Kind::BoolList, "a call the path also returns from, a return whose call the path took (false for other kinds)"),
    ],
};

/// Counter values.
pub const COUNTERS: TableSpec = TableSpec {
    name: "counters",
    doc: "per run, each counter of each module that is not zero, as the profile holds it: what `tally report DIR/runs/build=KEY` adds up",
    columns: &[
        RUN,
        col("module", Kind::U32, "the module (`modules.module`)"),
        col("counter", Kind::U32, "the counter's index in the module"),
        col("value", Kind::U64, "its value"),
    ],
};

/// Hashed path counts as the profile holds them.
pub const PATH_ENTRIES: TableSpec = TableSpec {
    name: "path_entries",
    doc: "path mode: per run, each entry of the runtime's path hash table, as the profile holds it",
    columns: &[
        RUN,
        col("module", Kind::U32, "the module (`modules.module`)"),
        col("function", Kind::U32, "the function's index in the module"),
        col(
            "lost",
            Kind::Bool,
            "an entry of lost increments (`path` is then 0)",
        ),
        col("path", Kind::U64, "the path number"),
        col("count", Kind::U64, "its count"),
    ],
};

/// Functions whose counts a run could not determine.
pub const INEXACT: TableSpec = TableSpec {
    name: "inexact",
    doc: "per run, each function whose counts could not be recovered; it has no count rows in that run",
    columns: &[
        RUN,
        FUNCTION,
        col("why", Kind::Str, "`tally report`'s reason"),
    ],
};

/// The tables written once per build.
pub const DIMENSIONS: [&TableSpec; 6] = [&BUILDS, &MODULES, &FUNCTIONS, &BLOCKS, &EDGES, &LINES];

/// The tables written per part (a batch of runs), `runs` last.
pub const FACTS: [&TableSpec; 14] = [
    &FUNCTION_COUNTS,
    &FUNCTION_TOTALS,
    &BLOCK_COUNTS,
    &EDGE_COUNTS,
    &LINE_COUNTS,
    &LINE_TOTALS,
    &PATH_COUNTS,
    &PATHS,
    &IPATH_COUNTS,
    &IPATHS,
    &INEXACT,
    &COUNTERS,
    &PATH_ENTRIES,
    &RUNS,
];

fn kind_sql(k: Kind) -> &'static str {
    match k {
        Kind::U32 => "UINTEGER",
        Kind::U64 => "UBIGINT",
        Kind::Str => "VARCHAR",
        Kind::Bool => "BOOLEAN",
        Kind::Bytes => "BLOB",
        Kind::Labels => "MAP(VARCHAR, VARCHAR)",
        Kind::U32List => "UINTEGER[]",
        Kind::StrList => "VARCHAR[]",
        Kind::BoolList => "BOOLEAN[]",
    }
}

/// The schema as the Markdown section of docs/dataset.md between its schema markers.
pub fn markdown() -> String {
    let mut out = format!("Schema version {SCHEMA_VERSION}.\n");
    for t in DIMENSIONS.iter().chain(FACTS.iter()) {
        let mut doc = t.doc.chars();
        let first = doc
            .next()
            .map(|c| c.to_ascii_uppercase())
            .unwrap_or_default();
        out.push_str(&format!(
            "\n### `{}`\n\n{first}{}.\n\n| column | type | |\n|---|---|---|\n",
            t.name,
            doc.as_str()
        ));
        out.push_str("| `build` | VARCHAR | the build (the Hive partition `build=...`) |\n");
        for c in t.columns {
            let null = if c.nullable { ", NULL" } else { "" };
            out.push_str(&format!(
                "| `{}` | {}{null} | {} |\n",
                c.name,
                kind_sql(c.kind),
                c.doc
            ));
        }
    }
    out
}
