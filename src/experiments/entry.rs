//! A registered experiment behind one object-safe interface: what the registry (`mod.rs`) holds
//! for each experiment type, so the CLI, `run`, `finish`, `merge` and `Outcome::load` find an
//! experiment by its name.

use std::marker::PhantomData;
use std::path::Path;

use super::experiment::Experiment;
use super::finish::finish_with;
use super::outcome::Outcome;
use super::plan::{ExperimentKind, Plan, PlanOption};
use super::run::{run_with, RunOptions, RunSummary};
use crate::error::Result;

/// What the registry knows of an experiment.
pub trait Registered: Sync {
    fn kind(&self) -> ExperimentKind;
    /// Where it stands in the paper.
    fn paper(&self) -> &'static str;
    /// What it asks, in one line.
    fn summary(&self) -> &'static str;
    /// The plan options it reads beyond the common ones.
    fn options(&self) -> &'static [PlanOption];
    fn run(&self, plan: &Plan, opts: &RunOptions) -> Result<RunSummary>;
    fn finish(&self, dir: &Path) -> Result<Outcome>;
    /// Parses its `result.json`.
    fn parse(&self, text: &str) -> Result<Outcome>;
}

/// The registry's entry for experiment `E`.
pub struct Entry<E>(PhantomData<fn() -> E>);

impl<E> Entry<E> {
    pub const NEW: Self = Entry(PhantomData);
}

impl<E: Experiment> Registered for Entry<E> {
    fn kind(&self) -> ExperimentKind {
        ExperimentKind::named(E::NAME)
    }

    fn paper(&self) -> &'static str {
        E::PAPER
    }

    fn summary(&self) -> &'static str {
        E::SUMMARY
    }

    fn options(&self) -> &'static [PlanOption] {
        E::OPTIONS
    }

    fn run(&self, plan: &Plan, opts: &RunOptions) -> Result<RunSummary> {
        run_with::<E>(plan, opts)
    }

    fn finish(&self, dir: &Path) -> Result<Outcome> {
        finish_with::<E>(dir)
    }

    fn parse(&self, text: &str) -> Result<Outcome> {
        Outcome::parse::<E>(text)
    }
}
