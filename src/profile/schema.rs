//! Versions of the JSON layouts this crate writes, so that a file written today is read correctly
//! after a layout changes. A profile (`profile --json`, the explorer's API, each record's
//! `profile`) and a run's record line (`records.jsonl`) carry `"schema_version"`, written first.
//!
//! - Absent: written before the field existed (entropy-lens ≤ 0.1.0 before 2026-12-05); the
//!   layout is that of version 1, and such files read back to their own bytes.
//! - 1: the layout documented in `docs/formats.md`.
//! - Larger than this build knows: refused with a message to upgrade, never half-read.
//!
//! A later change to a layout raises its version here and converts the older versions it still
//! reads where it reads them.

use serde::{Deserialize, Deserializer};

/// The layout of a profile's JSON object that this build writes.
pub const PROFILE_SCHEMA_VERSION: u32 = 1;
/// The layout of a line of an experiment's `records.jsonl` that this build writes.
pub const RECORD_SCHEMA_VERSION: u32 = 1;

fn known<'de, D: Deserializer<'de>>(
    d: D,
    what: &str,
    current: u32,
) -> std::result::Result<Option<u32>, D::Error> {
    let v = Option::<u32>::deserialize(d)?;
    match v {
        Some(n) if n == 0 || n > current => Err(serde::de::Error::custom(format!(
            "{what} of schema_version {n}, which this entropy-lens ({}) does not know (it reads 1 to {current}); upgrade entropy-lens to read it",
            env!("CARGO_PKG_VERSION")
        ))),
        v => Ok(v),
    }
}

/// `deserialize_with` for a profile's `schema_version`.
pub(crate) fn profile_version<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<u32>, D::Error> {
    known(d, "a profile", PROFILE_SCHEMA_VERSION)
}

/// `deserialize_with` for a record line's `schema_version`.
pub(crate) fn record_version<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<u32>, D::Error> {
    known(d, "a record", RECORD_SCHEMA_VERSION)
}
