//! The result of a run, whatever the experiment: an [`Outcome`] holds the experiment's own result
//! type behind one interface, so the CLI, the report page and notebooks show any experiment's
//! result the same way (tables, charts, the paper's numbers) and a notebook can still reach the
//! typed result ([`Outcome::result`]).

use std::any::Any;
use std::fmt::Debug;

use super::experiment::Experiment;
use super::plan::ExperimentKind;
use crate::analysis::Table;
use crate::error::{Error, Result};
use crate::plots::Chart;

/// An experiment's result seen through what every result can do.
trait AnyResult: Debug + Send + Sync {
    fn kind(&self) -> ExperimentKind;
    fn to_json(&self) -> Result<String>;
    fn tables(&self) -> Vec<Table>;
    fn charts(&self) -> Result<Vec<Chart>>;
    /// The comparison table of `all` (results of this same experiment, self among them).
    fn comparison(&self, all: &[&Outcome]) -> Result<Vec<Table>>;
    fn as_any(&self) -> &dyn Any;
    fn clone_box(&self) -> Box<dyn AnyResult>;
}

/// The result of experiment `E`.
struct Typed<E: Experiment>(E::Result);

impl<E: Experiment> Debug for Typed<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: Experiment> AnyResult for Typed<E> {
    fn kind(&self) -> ExperimentKind {
        ExperimentKind::named(E::NAME)
    }

    fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(&self.0)? + "\n")
    }

    fn tables(&self) -> Vec<Table> {
        E::tables(&self.0)
    }

    fn charts(&self) -> Result<Vec<Chart>> {
        E::charts(&self.0)
    }

    fn comparison(&self, all: &[&Outcome]) -> Result<Vec<Table>> {
        let typed: Vec<&E::Result> = all
            .iter()
            .map(|o| {
                o.result::<E::Result>().ok_or_else(|| {
                    Error::invalid(format!(
                        "cannot put {} and {} results in one table",
                        E::NAME,
                        o.kind().name()
                    ))
                })
            })
            .collect::<Result<_>>()?;
        Ok(E::comparison(&typed))
    }

    fn as_any(&self) -> &dyn Any {
        &self.0
    }

    fn clone_box(&self) -> Box<dyn AnyResult> {
        Box::new(Typed::<E>(self.0.clone()))
    }
}

/// The result of an experiment (the content of `result.json`), which shows itself as tables and
/// charts in a notebook.
#[derive(Debug)]
pub struct Outcome {
    result: Box<dyn AnyResult>,
}

impl Clone for Outcome {
    fn clone(&self) -> Self {
        Self {
            result: self.result.clone_box(),
        }
    }
}

impl PartialEq for Outcome {
    /// Equal when they are results of the same experiment with the same `result.json`.
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind()
            && matches!((self.to_json(), other.to_json()), (Ok(a), Ok(b)) if a == b)
    }
}

impl Outcome {
    /// The outcome of experiment `E`.
    pub fn new<E: Experiment>(result: E::Result) -> Self {
        Self {
            result: Box::new(Typed::<E>(result)),
        }
    }

    /// Parses `result.json` of experiment `E`.
    pub fn parse<E: Experiment>(text: &str) -> Result<Self> {
        let r: E::Result = serde_json::from_str(text).map_err(|e| {
            Error::Data(format!(
                "this is not a result of the {} experiment this version writes: {e}",
                E::NAME
            ))
        })?;
        Ok(Self::new::<E>(r))
    }

    pub fn kind(&self) -> ExperimentKind {
        self.result.kind()
    }

    /// The typed result, when it is an `R` (e.g. `outcome.result::<TasksResult>()`).
    pub fn result<R: 'static>(&self) -> Option<&R> {
        self.result.as_any().downcast_ref::<R>()
    }

    /// `result.json`'s bytes: pretty JSON with a final newline, nothing time-dependent.
    pub fn to_json(&self) -> Result<String> {
        self.result.to_json()
    }

    /// Our numbers beside the paper's.
    pub fn comparison(&self) -> Vec<Table> {
        // One outcome compared with itself: cannot fail.
        self.result.comparison(&[self]).unwrap_or_default()
    }

    /// Tables that display themselves in a notebook: the comparison with the paper.
    pub fn comparison_view(&self) -> Tables {
        Tables(self.comparison())
    }

    /// Tables that display themselves in a notebook: the result's own tables.
    pub fn tables_view(&self) -> Tables {
        Tables(self.tables())
    }

    /// The result's own tables.
    pub fn tables(&self) -> Vec<Table> {
        self.result.tables()
    }

    /// The paper's figures for this result.
    pub fn charts(&self) -> Result<Vec<Chart>> {
        self.result.charts()
    }

    /// The comparison and result tables as HTML.
    pub fn tables_html(&self) -> String {
        self.comparison()
            .iter()
            .chain(&self.tables())
            .map(Table::to_html)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Renders in a Rust (evcxr) notebook: the tables, then the charts.
    pub fn evcxr_display(&self) {
        let mut html = self.tables_html();
        match self.charts() {
            Ok(charts) => charts
                .iter()
                .for_each(|c| html.push_str(&c.notebook_html())),
            Err(e) => html.push_str(&format!("<p>charts unavailable: {e}</p>")),
        }
        crate::display::evcxr_html(&html);
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for t in self.comparison().iter().chain(&self.tables()) {
            writeln!(f, "{t}")?;
        }
        Ok(())
    }
}

/// Several runs of one experiment (e.g. one per model) beside the paper's numbers.
pub fn compare(outcomes: &[Outcome]) -> Result<Vec<Table>> {
    let Some(first) = outcomes.first() else {
        return Err(Error::invalid("nothing to compare"));
    };
    let all: Vec<&Outcome> = outcomes.iter().collect();
    first.result.comparison(&all)
}

/// A list of tables that shows itself (HTML in a notebook, aligned text elsewhere).
#[derive(Clone, Debug, Default)]
pub struct Tables(pub Vec<Table>);

impl Tables {
    pub fn to_html(&self) -> String {
        self.0
            .iter()
            .map(Table::to_html)
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn evcxr_display(&self) {
        crate::display::evcxr_html(&self.to_html());
    }
}

impl std::fmt::Display for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for t in &self.0 {
            writeln!(f, "{t}")?;
        }
        Ok(())
    }
}
