//! A table of the dataset being filled row by row ([`Table`]) and written as one Parquet file
//! ([`Table::write`]): Arrow builders per column, the file written beside its final name and
//! renamed into place, so a reader (or an export that stopped half way) never sees part of
//! a file.

use super::schema::{Kind, TableSpec};
use super::DatasetError;
use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, ListBuilder, MapBuilder, StringBuilder,
    UInt32Builder, UInt64Builder,
};
use arrow_array::types::UInt32Type;
use arrow_array::{ArrayRef, DictionaryArray, RecordBatch};
use arrow_schema::{Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::path::Path;
use std::sync::Arc;

/// One column's builder.
enum Column {
    U32(UInt32Builder),
    U64(UInt64Builder),
    Str(StringBuilder),
    Bool(BooleanBuilder),
    Bytes(BinaryBuilder),
    Map(Box<MapBuilder<StringBuilder, StringBuilder>>),
    U32List(ListBuilder<UInt32Builder>),
    StrList(ListBuilder<StringBuilder>),
    BoolList(ListBuilder<BooleanBuilder>),
    /// A string column whose rows come in stretches of the same value (a fact table's `run`):
    /// each value stored once, the rows hold its index (an Arrow dictionary; Parquet stores
    /// the column as the same dictionary-encoded strings either way).
    Keyed {
        keys: UInt32Builder,
        values: StringBuilder,
        last: Option<String>,
    },
}

/// One value of a row, in the column's kind (`None`: NULL).
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    /// A `u32` column.
    U32(Option<u32>),
    /// A `u64` column.
    U64(Option<u64>),
    /// A string column.
    Str(Option<&'a str>),
    /// A boolean column.
    Bool(bool),
    /// A binary column.
    Bytes(&'a [u8]),
    /// A map of strings.
    Map(&'a [(String, String)]),
    /// A list of `u32`.
    U32List(&'a [u32]),
    /// A list of strings.
    StrList(&'a [String]),
    /// A list of booleans.
    BoolList(&'a [bool]),
}

/// Rows of one table.
pub struct Table {
    spec: &'static TableSpec,
    columns: Vec<Column>,
    rows: usize,
}

impl Table {
    /// An empty table of `spec`.
    pub fn new(spec: &'static TableSpec) -> Table {
        // Fact tables' runs and parts, and the files of line counts and totals (sorted by
        // file within a run or part).
        let keyed = |name: &str| {
            (spec.name != super::schema::RUNS.name && name == "run")
                || name == "part"
                || ([
                    super::schema::LINE_COUNTS.name,
                    super::schema::LINE_TOTALS.name,
                ]
                .contains(&spec.name)
                    && name == "file")
        };
        let columns = spec
            .columns
            .iter()
            .map(|c| match c.kind {
                Kind::Str if keyed(c.name) && !c.nullable => Column::Keyed {
                    keys: UInt32Builder::new(),
                    values: StringBuilder::new(),
                    last: None,
                },
                Kind::U32 => Column::U32(UInt32Builder::new()),
                Kind::U64 => Column::U64(UInt64Builder::new()),
                Kind::Str => Column::Str(StringBuilder::new()),
                Kind::Bool => Column::Bool(BooleanBuilder::new()),
                Kind::Bytes => Column::Bytes(BinaryBuilder::new()),
                Kind::U32List => Column::U32List(ListBuilder::new(UInt32Builder::new())),
                Kind::StrList => Column::StrList(ListBuilder::new(StringBuilder::new())),
                Kind::BoolList => Column::BoolList(ListBuilder::new(BooleanBuilder::new())),
                Kind::Labels => Column::Map(Box::new(MapBuilder::new(
                    None,
                    StringBuilder::new(),
                    StringBuilder::new(),
                ))),
            })
            .collect();
        Table {
            spec,
            columns,
            rows: 0,
        }
    }

    /// Rows so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Appends a row: one value per column, in the spec's order and kinds (a mismatch is a
    /// bug of the caller, caught by the tests).
    pub fn push(&mut self, row: &[Value<'_>]) {
        assert_eq!(row.len(), self.columns.len(), "row of {}", self.spec.name);
        for (c, v) in self.columns.iter_mut().zip(row) {
            match (c, *v) {
                (Column::U32(b), Value::U32(x)) => b.append_option(x),
                (Column::U64(b), Value::U64(x)) => b.append_option(x),
                (Column::Str(b), Value::Str(x)) => b.append_option(x),
                (Column::Keyed { keys, values, last }, Value::Str(Some(x))) => {
                    if last.as_deref() != Some(x) {
                        values.append_value(x);
                        *last = Some(x.to_string());
                    }
                    keys.append_value(values.len() as u32 - 1);
                }
                (Column::Bool(b), Value::Bool(x)) => b.append_value(x),
                (Column::Bytes(b), Value::Bytes(x)) => b.append_value(x),
                (Column::U32List(b), Value::U32List(x)) => {
                    b.values().append_slice(x);
                    b.append(true);
                }
                (Column::BoolList(b), Value::BoolList(x)) => {
                    b.values().append_slice(x);
                    b.append(true);
                }
                (Column::StrList(b), Value::StrList(x)) => {
                    for v in x {
                        b.values().append_value(v);
                    }
                    b.append(true);
                }
                (Column::Map(b), Value::Map(kv)) => {
                    for (k, v) in kv {
                        b.keys().append_value(k);
                        b.values().append_value(v);
                    }
                    // Cannot fail: keys and values were appended in pairs.
                    let _ = b.append(true);
                }
                _ => panic!("value of the wrong kind for a column of {}", self.spec.name),
            }
        }
        self.rows += 1;
    }

    /// The rows as a record batch, leaving the table empty.
    fn take_batch(&mut self) -> Result<RecordBatch, DatasetError> {
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|c| -> ArrayRef {
                match c {
                    Column::U32(b) => Arc::new(b.finish()),
                    Column::U64(b) => Arc::new(b.finish()),
                    Column::Str(b) => Arc::new(b.finish()),
                    Column::Bool(b) => Arc::new(b.finish()),
                    Column::Bytes(b) => Arc::new(b.finish()),
                    Column::U32List(b) => Arc::new(b.finish()),
                    Column::StrList(b) => Arc::new(b.finish()),
                    Column::BoolList(b) => Arc::new(b.finish()),
                    Column::Map(b) => Arc::new(b.finish()),
                    Column::Keyed { keys, values, last } => {
                        *last = None;
                        // Cannot fail: every key indexes a value appended before it.
                        Arc::new(
                            DictionaryArray::<UInt32Type>::try_new(
                                keys.finish(),
                                Arc::new(values.finish()),
                            )
                            .expect("keys index their values"),
                        )
                    }
                }
            })
            .collect();
        let fields: Vec<Field> = self
            .spec
            .columns
            .iter()
            .zip(&arrays)
            .map(|(c, a)| Field::new(c.name, a.data_type().clone(), c.nullable))
            .collect();
        self.rows = 0;
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(|e| {
            DatasetError::Arrow {
                table: self.spec.name,
                message: e.to_string(),
            }
        })
    }

    /// Writes the rows (even none) to the Parquet file `path` (through a temporary file
    /// beside it, renamed into place) and empties the table.
    pub fn write(&mut self, path: &Path) -> Result<(), DatasetError> {
        self.take()?.write(path)
    }

    /// The rows, to be written later (by another thread: [`Rows::write`]), leaving the table
    /// empty.
    pub fn take(&mut self) -> Result<Rows, DatasetError> {
        Ok(Rows(self.take_batch()?))
    }
}

/// The rows taken from a table, ready to be written.
pub struct Rows(RecordBatch);

impl Rows {
    /// Writes the rows (even none) to the Parquet file `path`, through a temporary file
    /// beside it renamed into place.
    pub fn write(self, path: &Path) -> Result<(), DatasetError> {
        let batch = self.0;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| DatasetError::io(dir, e))?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("part");
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let write = || -> Result<(), DatasetError> {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| DatasetError::io(&tmp, e))?;
            let props = WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build();
            let parquet = |e: parquet::errors::ParquetError| DatasetError::Parquet {
                path: tmp.display().to_string(),
                message: e.to_string(),
            };
            let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).map_err(parquet)?;
            w.write(&batch).map_err(parquet)?;
            let file = w.into_inner().map_err(parquet)?;
            file.sync_all().map_err(|e| DatasetError::io(&tmp, e))?;
            std::fs::rename(&tmp, path).map_err(|e| DatasetError::io(path, e))
        };
        let r = write();
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }
}
