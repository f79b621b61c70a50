//! SIZE arguments (`1048576`, `64K`, `1.5GiB`, `100MB`), parsed by the pipeline
//! as every front end does.

pub fn parse_size(text: &str) -> Result<u64, String> {
    bcd_pipeline::parse_size(text).map_err(|e| e.to_string())
}
