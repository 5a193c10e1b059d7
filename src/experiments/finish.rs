//! The end of a run: the result and the feature rows computed from the records
//! (`result.json`, `profiles.npy`, `index.json`, `report.html`), and the joining of shard folders.

use std::path::{Path, PathBuf};

use super::experiment::Experiment;
use super::outcome::Outcome;
use super::outputs::ProfileIndex;
use super::report::report_html;
use super::store::{
    write_atomic, write_npy, OutputDir, Record, RunContext, Shard, INDEX_FILE, PROFILES_FILE,
    REPORT_FILE, RESULT_FILE,
};
use crate::error::{Error, Result};

/// Computes the result of a complete folder of experiment `E` from its records and writes
/// `profiles.npy`, `index.json`, `result.json` and `report.html`. Refuses a shard, an incomplete
/// run, or a folder of another experiment.
pub fn finish_with<E: Experiment>(dir: &Path) -> Result<Outcome> {
    let out = OutputDir::open(dir)?;
    let cfg = &out.stored.config;
    if cfg.kind_name() != E::NAME {
        return Err(Error::invalid(format!(
            "{} holds a {} run, not {}",
            dir.display(),
            cfg.kind_name(),
            E::NAME
        )));
    }
    let records = complete_records(&out)?;
    let spec: E::Spec = cfg.spec.typed()?;
    let (result, features) = E::finish(cfg, &spec, &records)?;
    let outcome = Outcome::new::<E>(result);
    write_npy(
        &out.file(PROFILES_FILE),
        features.n_rows(),
        features.layout.n_features(),
        &features.rows,
    )?;
    let index = serde_json::to_string_pretty(&ProfileIndex::from(&features))? + "\n";
    write_atomic(&out.file(INDEX_FILE), index.as_bytes())?;
    write_atomic(&out.file(RESULT_FILE), outcome.to_json()?.as_bytes())?;
    let html = report_html(&out.stored, &outcome)?;
    write_atomic(&out.file(REPORT_FILE), html.as_bytes())?;
    out.log(&format!(
        "finished: {} items → {RESULT_FILE}",
        records.len()
    ))?;
    Ok(outcome)
}

/// Every record of a whole (unsharded, complete) folder, sorted by item.
fn complete_records(out: &OutputDir) -> Result<Vec<Record>> {
    let dir = &out.path;
    if let Some(shard) = out.stored.run.shard.filter(|s| !s.is_whole()) {
        return Err(Error::invalid(format!(
            "{} holds shard {shard} only; join the shards with `entropy-lens merge DIR... --out DIR`",
            dir.display()
        )));
    }
    let mut records = out.read_records()?;
    let n_items = out.stored.n_items;
    if records.len() != n_items {
        return Err(Error::invalid(format!(
            "{} has {} of {n_items} items; rerun the experiment with the same arguments to finish it",
            dir.display(),
            records.len()
        )));
    }
    records.sort_by_key(|r| r.index);
    Ok(records)
}

/// Joins shard folders of one run into `out` (records only; finish it next). The shards must
/// share one configuration and hold every item exactly once; the records are those an unsharded
/// run writes, in item order.
pub fn merge_shards(dirs: &[PathBuf], out: &Path) -> Result<()> {
    let Some(first) = dirs.first() else {
        return Err(Error::invalid("merge needs at least one shard folder"));
    };
    let opened: Vec<OutputDir> = dirs
        .iter()
        .map(|d| OutputDir::open(d))
        .collect::<Result<_>>()?;
    let base = &opened[0].stored;
    for (d, o) in dirs.iter().zip(&opened).skip(1) {
        if o.stored.n_items != base.n_items || o.stored.items_sha256 != base.items_sha256 {
            return Err(Error::invalid(format!(
                "{} and {} hold different prompt lists ({} and {} items); only shards of one run can be merged",
                first.display(),
                d.display(),
                base.n_items,
                o.stored.n_items
            )));
        }
        if o.stored.config_sha256 != base.config_sha256 {
            return Err(Error::invalid(format!(
                "{} and {} come from different configurations ({}); only shards of one run can be merged",
                first.display(),
                d.display(),
                o.stored.config.differences(&base.config).into_iter().take(4).collect::<Vec<_>>().join("; ")
            )));
        }
        if o.stored.run.batch != base.run.batch {
            return Err(Error::invalid(format!(
                "{} was run in batches of {} and {} in batches of {}: shards hold whole batches, so only shards of one batch size can be merged",
                first.display(),
                base.run.batch,
                d.display(),
                o.stored.run.batch
            )));
        }
    }
    let mut owner: Vec<Option<usize>> = vec![None; base.n_items];
    let mut records = Vec::with_capacity(base.n_items);
    for (k, o) in opened.iter().enumerate() {
        for r in o.read_records()? {
            if let Some(prev) = owner[r.index] {
                return Err(Error::invalid(format!(
                    "item {} ({}) is in both {} and {}: the shards overlap",
                    r.index,
                    r.id,
                    dirs[prev].display(),
                    dirs[k].display()
                )));
            }
            owner[r.index] = Some(k);
            records.push(r);
        }
    }
    let missing: Vec<usize> = (0..base.n_items).filter(|&i| owner[i].is_none()).collect();
    if let Some(&m) = missing.first() {
        let shards: Vec<String> = opened
            .iter()
            .filter_map(|o| o.stored.run.shard.map(|s| s.to_string()))
            .collect();
        let count = base.run.shard.map(|s| s.count).unwrap_or(1);
        return Err(Error::invalid(format!(
            "{} of {} items are missing (the first is item {m}, which belongs to shard {}); merged shards: {}; run the missing or unfinished shards first",
            missing.len(),
            base.n_items,
            Shard::of(m, base.run.batch, count),
            if shards.is_empty() { "none".into() } else { shards.join(", ") }
        )));
    }
    records.sort_by_key(|r| r.index);
    let run = RunContext {
        shard: None,
        ..base.run.clone()
    };
    let dest = OutputDir::prepare_with(
        out,
        &base.config,
        base.n_items,
        base.items_sha256.clone(),
        run,
    )?;
    let _lock = dest.lock()?;
    dest.write_records(&records)?;
    dest.log(&format!(
        "merged {} items from {}",
        records.len(),
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}
