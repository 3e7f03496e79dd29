//! Reading back what a dataset holds: the runs of a build (so that an export skips them).

use super::DatasetError;
use arrow_array::{Array, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use std::collections::HashSet;
use std::path::Path;

/// The run ids in `DIR/runs/build=KEY/*.parquet` (none when the directory does not exist).
pub(super) fn runs_of(dir: &Path, key: &str) -> Result<HashSet<String>, DatasetError> {
    let at = dir
        .join(super::schema::RUNS.name)
        .join(format!("build={key}"));
    let mut out = HashSet::new();
    let entries = match std::fs::read_dir(&at) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(DatasetError::io(&at, e)),
    };
    for e in entries {
        let path = e.map_err(|e| DatasetError::io(&at, e))?.path();
        if path.extension().is_none_or(|x| x != "parquet") {
            continue;
        }
        let bad = |message: String| DatasetError::Parquet {
            path: path.display().to_string(),
            message,
        };
        let file = std::fs::File::open(&path).map_err(|e| DatasetError::io(&path, e))?;
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| bad(e.to_string()))?;
        let mask = ProjectionMask::columns(builder.parquet_schema(), ["run"]);
        let reader = builder
            .with_projection(mask)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        for batch in reader {
            let batch = batch.map_err(|e| bad(e.to_string()))?;
            let col = batch
                .column_by_name("run")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| bad("no run column of strings".into()))?;
            out.extend((0..col.len()).map(|i| col.value(i).to_string()));
        }
    }
    Ok(out)
}
