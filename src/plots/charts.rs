//! The chart functions: the paper's figures and the classic logit-lens view.

use ndarray::{Array2, ArrayView2, Axis as NdAxis};
use plotly::common::{Marker, Mode, Title};
use plotly::layout::{Axis, AxisType, GridPattern, LayoutGrid};
use plotly::{Bar, Layout, Plot, Scatter};

use super::traces::CellHeatmap;
use super::{Chart, Sketch};
use crate::analysis::{Projection, Table};
use crate::error::{Error, Result};
use crate::lens::alpha_key;
use crate::model::TextTokenizer;
use crate::profile::{
    delta, depth_normalize, DepthSummary, EntropyProfile, LensFit, PositionProfile, ReadPoint,
};

const GREEN: &str = "#2ca02c";
const RED: &str = "#d62728";
const GREY: &str = "#7f7f7f";

/// Which statistic a heatmap shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HeatMetric {
    Shannon,
    /// A Rényi order present in the profile.
    Renyi(f64),
    /// Size of the top-p candidate set (log scale colours).
    TopPCount,
}

impl HeatMetric {
    /// Parses `shannon`, `top_p` or `renyi:A` (A a Rényi order: `0.5`, `2`, `inf`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim() {
            "shannon" => Ok(HeatMetric::Shannon),
            "top_p" => Ok(HeatMetric::TopPCount),
            other => match other.strip_prefix("renyi:") {
                // Rényi entropy of order 1 is Shannon entropy.
                Some(a) => match crate::lens::parse_alpha(a)? {
                    1.0 => Ok(HeatMetric::Shannon),
                    a => Ok(HeatMetric::Renyi(a)),
                },
                None => Err(Error::invalid(format!(
                    "unknown statistic `{other}`: use shannon, top_p or renyi:A (e.g. renyi:0.5)"
                ))),
            },
        }
    }

    fn name(self) -> String {
        match self {
            HeatMetric::Shannon => "Shannon entropy (nats)".into(),
            HeatMetric::Renyi(a) => format!("Rényi entropy α = {} (nats)", alpha_key(a)),
            HeatMetric::TopPCount => "log10 top-p candidate count".into(),
        }
    }

    fn values(self, p: &PositionProfile) -> Result<Vec<f64>> {
        match self {
            HeatMetric::Shannon => Ok(p.shannon.clone()),
            HeatMetric::Renyi(a) => p.renyi.get(&alpha_key(a)).cloned().ok_or_else(|| {
                Error::Data(format!(
                    "the profile has no Rényi entropy of order {}; measure it first",
                    alpha_key(a)
                ))
            }),
            HeatMetric::TopPCount => Ok(p
                .top_p_count
                .iter()
                .map(|&c| (c.max(1) as f64).log10())
                .collect()),
        }
    }
}

/// The measured position at `index` (into `profile.positions`), or a clear error.
fn position_at(profile: &EntropyProfile, index: usize) -> Result<&PositionProfile> {
    profile.positions.get(index).ok_or_else(|| {
        Error::invalid(format!(
            "position index {index} is outside 0..{} (indices count measured positions)",
            profile.positions.len()
        ))
    })
}

/// The token a measured position predicts (shown as "·" past the end of the sequence).
fn next_token_label(profile: &EntropyProfile, p: &PositionProfile) -> String {
    profile
        .tokens
        .get(p.position + 1)
        .map(|t| token_label(t))
        .unwrap_or_else(|| "·".into())
}

fn token_label(t: &str) -> String {
    let shown: String = t.replace('\n', "\\n").replace('\t', "\\t");
    format!("{shown:?}")
}

fn decode(tok: Option<&TextTokenizer>, id: u32) -> String {
    match tok {
        Some(t) => token_label(&t.token_text(id)),
        None => format!("#{id}"),
    }
}

fn layout(title: &str, x: &str, y: &str, height: usize) -> Layout {
    Layout::new()
        .title(Title::with_text(title))
        .height(height)
        .x_axis(Axis::new().title(Title::with_text(x)))
        .y_axis(Axis::new().title(Title::with_text(y)))
}

/// The classic logit-lens view: blocks × positions, coloured by `metric`, each cell labelled with
/// the lens's most likely next token and hovering with the top-k tokens and probabilities.
///
/// Pass the model's tokenizer to show token text (ids otherwise).
pub fn entropy_heatmap(
    profile: &EntropyProfile,
    tokenizer: Option<&TextTokenizer>,
    metric: HeatMetric,
) -> Result<Chart> {
    if profile.positions.is_empty() {
        return Err(Error::Data("the profile has no measured positions".into()));
    }
    let l = profile.n_points();
    let x: Vec<String> = profile
        .positions
        .iter()
        .map(|p| {
            let t = profile
                .tokens
                .get(p.position)
                .map(|t| token_label(t))
                .unwrap_or_default();
            format!("{} {t}", p.position)
        })
        .collect();
    let y: Vec<String> = profile
        .point_labels()
        .iter()
        .map(|j| format!("block {j}"))
        .collect();
    let columns: Vec<Vec<f64>> = profile
        .positions
        .iter()
        .map(|p| metric.values(p))
        .collect::<Result<_>>()?;
    // z is rows = blocks, columns = positions.
    let z: Vec<Vec<f64>> = (0..l)
        .map(|j| columns.iter().map(|c| c[j]).collect())
        .collect();
    let mut hover = vec![vec![String::new(); columns.len()]; l];
    let mut text = vec![vec![String::new(); columns.len()]; l];
    for (c, p) in profile.positions.iter().enumerate() {
        for j in 0..l {
            let top: Vec<String> = p
                .top_k
                .get(j)
                .map(|k| {
                    k.iter()
                        .map(|&(id, pr)| format!("{} {:.3}", decode(tokenizer, id), pr))
                        .collect()
                })
                .unwrap_or_default();
            text[j][c] = p
                .top_k
                .get(j)
                .and_then(|k| k.first())
                .map(|&(id, _)| decode(tokenizer, id))
                .unwrap_or_default();
            hover[j][c] = format!(
                "position {} {}<br>{}: {} = {:.3}<br>top-p count {}<br>top-{}: {}",
                p.position,
                profile
                    .tokens
                    .get(p.position)
                    .map(|t| token_label(t))
                    .unwrap_or_default(),
                y[j],
                metric.name(),
                z[j][c],
                p.top_p_count.get(j).copied().unwrap_or(0),
                top.len(),
                top.join(", ")
            );
        }
    }
    let mut trace = CellHeatmap::new(x.clone(), y.clone(), z.clone());
    trace.hover_text = Some(hover);
    if columns.len() <= 24 && l <= 36 {
        trace.text = Some(text);
        trace.text_template = Some("%{text}");
    }
    trace.color_bar = serde_json::json!({"title": {"text": metric.name()}});
    let title = format!("{}: {} by block and position", profile.model, metric.name());
    let height = (200 + 14 * l).clamp(360, 900);
    let mut plot = Plot::new();
    plot.add_trace(Box::new(trace));
    // Each position's prediction depth, where it falls on a measured point.
    let (dx, dy): (Vec<String>, Vec<String>) = profile
        .positions
        .iter()
        .zip(&x)
        .filter_map(|(p, xl)| {
            let d = p.prediction_depth?;
            Some((xl.clone(), y.get(d.checked_sub(1)?)?.clone()))
        })
        .unzip();
    if !dx.is_empty() {
        plot.add_trace(
            Scatter::new(dx, dy)
                .mode(Mode::Markers)
                .name("prediction depth")
                .marker(
                    Marker::new()
                        .symbol(plotly::common::MarkerSymbol::Diamond)
                        .size(9)
                        .color("white")
                        .line(plotly::common::Line::new().color("black").width(1.0)),
                ),
        );
    }
    plot.set_layout(
        layout(&title, "position → token", "", height)
            .margin(plotly::layout::Margin::new().left(90))
            // Above the plot, clear of the colour bar.
            .legend(
                plotly::layout::Legend::new()
                    .orientation(plotly::common::Orientation::Horizontal)
                    .x(0.0)
                    .y(1.02)
                    .y_anchor(plotly::common::Anchor::Bottom),
            ),
    );
    Ok(Chart::new(plot, title, height, Sketch::Heatmap { x, y, z }))
}

/// Entropy profiles (one line per measured position, or only those listed in `positions`, indices
/// into `profile.positions`) over blocks 1..L.
pub fn profile_lines(
    profile: &EntropyProfile,
    positions: Option<&[usize]>,
    metric: HeatMetric,
) -> Result<Chart> {
    let chosen: Vec<usize> = match positions {
        Some(p) => p.to_vec(),
        None => (0..profile.positions.len()).collect(),
    };
    if chosen.is_empty() {
        return Err(Error::Data("no positions to plot".into()));
    }
    let mut series = Vec::new();
    for &i in &chosen {
        let p = position_at(profile, i)?;
        let ys = metric.values(p)?;
        let next = next_token_label(profile, p);
        series.push((
            format!("{} → {next}", p.position),
            point_axis(profile.read_point, profile.n_blocks),
            ys,
        ));
    }
    let title = format!("{}: entropy profiles", profile.model);
    Ok(line_chart(
        &title,
        point_axis_title(profile.read_point),
        &metric.name(),
        series,
        Mode::LinesMarkers,
    ))
}

/// The x of each measured point: block i at i, the residual after block i's attention at i − ½,
/// block i's attention write at i − ⅔ and its MLP write at i − ⅓.
pub fn point_axis(read_point: ReadPoint, n_blocks: usize) -> Vec<f64> {
    let (attn, mlp) = (2.0 / 3.0, 1.0 / 3.0);
    (1..=n_blocks)
        .flat_map(|i| {
            let i = i as f64;
            match read_point {
                ReadPoint::Block => vec![i],
                ReadPoint::Attention => vec![i - 0.5],
                ReadPoint::Both => vec![i - 0.5, i],
                ReadPoint::AttnOut => vec![i - attn],
                ReadPoint::MlpOut => vec![i - mlp],
                ReadPoint::Components => vec![i - attn, i - mlp, i],
            }
        })
        .collect()
}

fn point_axis_title(read_point: ReadPoint) -> &'static str {
    match read_point {
        ReadPoint::Block => "block",
        ReadPoint::Attention | ReadPoint::Both => {
            "block (i − ½: inside block i, after its attention)"
        }
        ReadPoint::AttnOut => "block (i − ⅔: what block i's attention writes)",
        ReadPoint::MlpOut => "block (i − ⅓: what block i's MLP writes)",
        ReadPoint::Components => "block (i − ⅔: block i's attention write; i − ⅓: its MLP write)",
    }
}

/// Mean KL(final ‖ point) over each profile's positions, by block: how far each read of the
/// residual stream is from what the model finally outputs — one line per named profile (e.g. the
/// same prompt through the logit lens and a tuned lens). Needs profiles measured with
/// [`crate::lens::StatSpec::kl_to_final`].
pub fn kl_by_block(profiles: &[(&str, &EntropyProfile)]) -> Result<Chart> {
    if profiles.is_empty() {
        return Err(Error::Data("no profiles to plot".into()));
    }
    let mut series = Vec::new();
    for (name, p) in profiles {
        let m = p.kl_matrix()?;
        if m.nrows() == 0 {
            return Err(Error::Data(format!(
                "profile {name:?} has no measured positions"
            )));
        }
        let mean = m
            .mean_axis(NdAxis(0))
            .ok_or_else(|| Error::Data("empty KL matrix".into()))?;
        series.push((
            name.to_string(),
            point_axis(p.read_point, p.n_blocks),
            mean.to_vec(),
        ));
    }
    let models: Vec<&str> = profiles.iter().map(|(_, p)| p.model.as_str()).collect();
    let title = format!(
        "{}: KL(final ‖ lens) by block, mean over positions",
        models.first().copied().unwrap_or_default()
    );
    Ok(line_chart(
        &title,
        point_axis_title(profiles[0].1.read_point),
        "KL (nats)",
        series,
        Mode::LinesMarkers,
    ))
}

/// The target token's rank at every block (rows) and position (columns), coloured by log10 rank
/// (1 = the most likely token): where in depth the token the model goes on to produce becomes
/// the lens' top prediction. Needs a profile measured with [`crate::lens::StatSpec::target`].
pub fn target_rank_heatmap(
    profile: &EntropyProfile,
    tokenizer: Option<&TextTokenizer>,
) -> Result<Chart> {
    let (ranks, positions) = profile.target_rank_matrix()?;
    let labels = profile.point_labels();
    let traced: Vec<&PositionProfile> = profile
        .positions
        .iter()
        .filter(|p| p.target.is_some())
        .collect();
    let x: Vec<String> = traced
        .iter()
        .map(|p| {
            let id = p.target.as_ref().map_or(0, |t| t.id);
            format!("{} → {}", p.position, decode(tokenizer, id))
        })
        .collect();
    let y: Vec<String> = labels.iter().map(|j| format!("block {j}")).collect();
    let l = labels.len();
    let z: Vec<Vec<f64>> = (0..l)
        .map(|j| {
            (0..positions.len())
                .map(|c| ranks[[c, j]].log10())
                .collect()
        })
        .collect();
    let mut hover = vec![vec![String::new(); positions.len()]; l];
    let mut text = vec![vec![String::new(); positions.len()]; l];
    for (c, p) in traced.iter().enumerate() {
        let Some(t) = &p.target else { continue };
        for j in 0..l {
            let rank = t.rank[j];
            text[j][c] = if rank < 1000 {
                rank.to_string()
            } else {
                "≥1k".into()
            };
            hover[j][c] = format!(
                "position {}, target {}<br>{}: rank {rank}, p = {:.3e} (log p = {:.3})",
                p.position,
                decode(tokenizer, t.id),
                y[j],
                t.logprob[j].exp(),
                t.logprob[j]
            );
        }
    }
    let mut trace = CellHeatmap::new(x.clone(), y.clone(), z.clone());
    trace.hover_text = Some(hover);
    if positions.len() <= 24 && l <= 40 {
        trace.text = Some(text);
        trace.text_template = Some("%{text}");
    }
    trace.color_bar = serde_json::json!({"title": {"text": "log10 rank"}});
    let title = format!("{}: rank of the next token by block", profile.model);
    let height = (200 + 14 * l).clamp(360, 900);
    let mut plot = Plot::new();
    plot.add_trace(Box::new(trace));
    plot.set_layout(
        layout(&title, "position → the token that comes next", "", height)
            .margin(plotly::layout::Margin::new().left(90)),
    );
    Ok(Chart::new(plot, title, height, Sketch::Heatmap { x, y, z }))
}

/// A line chart of named (x, y) series, with its static sketch.
fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: Vec<(String, Vec<f64>, Vec<f64>)>,
    mode: Mode,
) -> Chart {
    let mut plot = Plot::new();
    for (name, xs, ys) in &series {
        plot.add_trace(
            Scatter::new(xs.clone(), ys.clone())
                .mode(mode.clone())
                .name(name),
        );
    }
    plot.set_layout(layout(title, x_label, y_label, 420));
    let bands = vec![None; series.len()];
    Chart::new(
        plot,
        title,
        420,
        Sketch::Lines {
            x_label: x_label.into(),
            y_label: y_label.into(),
            series,
            bands,
            log_y: false,
        },
    )
}

/// Lines through `(x, y)` series (one per name), e.g. a statistic by block.
pub fn xy_lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: Vec<(String, Vec<f64>, Vec<f64>)>,
) -> Result<Chart> {
    check_series(&series)?;
    Ok(line_chart(
        title,
        x_label,
        y_label,
        series,
        Mode::LinesMarkers,
    ))
}

/// As [`xy_lines`], on a logarithmic y axis: for series that span decades (a lens' KL by layer,
/// where the embedding layer's can be a hundred times the last block's).
///
/// # Errors
/// As [`xy_lines`], and when a y value is not positive and finite.
pub fn xy_lines_log_y(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: Vec<(String, Vec<f64>, Vec<f64>)>,
) -> Result<Chart> {
    if let Some((name, _, _)) = series
        .iter()
        .find(|(_, _, ys)| ys.iter().any(|y| !(y.is_finite() && *y > 0.0)))
    {
        return Err(Error::Data(format!(
            "series {name:?} has a y value that is not positive and finite, which a log axis cannot show; use xy_lines"
        )));
    }
    let mut chart = xy_lines(title, x_label, y_label, series)?;
    chart.plot.set_layout(
        layout(title, x_label, y_label, 420).y_axis(
            Axis::new()
                .title(Title::with_text(y_label))
                .type_(AxisType::Log),
        ),
    );
    if let Sketch::Lines { log_y, .. } = &mut chart.sketch {
        *log_y = true;
    }
    Ok(chart)
}

fn check_series(series: &[(String, Vec<f64>, Vec<f64>)]) -> Result<()> {
    if series.is_empty() {
        return Err(Error::Data("no series to plot".into()));
    }
    for (name, xs, ys) in series {
        if xs.len() != ys.len() {
            return Err(Error::Data(format!(
                "series {name:?} has {} x values and {} y values",
                xs.len(),
                ys.len()
            )));
        }
    }
    Ok(())
}

/// Points `(x, y)`, one colour per group.
pub fn xy_scatter(
    title: &str,
    x_label: &str,
    y_label: &str,
    groups: Vec<(String, Vec<f64>, Vec<f64>)>,
) -> Result<Chart> {
    check_series(&groups)?;
    let mut plot = Plot::new();
    let mut sketch = Vec::new();
    for (name, xs, ys) in &groups {
        plot.add_trace(
            Scatter::new(xs.clone(), ys.clone())
                .mode(Mode::Markers)
                .name(name)
                .marker(Marker::new().size(5).opacity(0.5)),
        );
        sketch.push((
            name.clone(),
            xs.iter().zip(ys).map(|(&x, &y)| (x, y, 2.5)).collect(),
        ));
    }
    plot.set_layout(layout(title, x_label, y_label, 440));
    Ok(Chart::new(
        plot,
        title,
        440,
        Sketch::Scatter { groups: sketch },
    ))
}

/// Shannon and every measured Rényi entropy of one position (index into `profile.positions`)
/// over blocks: how the choice of α reshapes a profile.
pub fn renyi_lines(profile: &EntropyProfile, position_index: usize) -> Result<Chart> {
    let p = position_at(profile, position_index)?;
    if p.renyi.is_empty() {
        return Err(Error::Data(
            "the profile has no Rényi entropies; measure them with StatSpec::alphas (CLI: --alpha)"
                .into(),
        ));
    }
    let mut keyed: Vec<(f64, String, Vec<f64>)> = p
        .renyi
        .iter()
        .map(|(k, v)| {
            let a = crate::lens::parse_alpha(k).unwrap_or(f64::NAN);
            (a, format!("α = {k}"), v.clone())
        })
        .collect();
    keyed.push((1.0, "α = 1 (Shannon)".into(), p.shannon.clone()));
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let series = keyed
        .into_iter()
        .map(|(_, name, ys)| (name, point_axis(profile.read_point, profile.n_blocks), ys))
        .collect();
    let next = next_token_label(profile, p);
    let title = format!(
        "Rényi entropies by block at position {} (→ {next})",
        p.position
    );
    Ok(line_chart(
        &title,
        "block",
        "entropy (nats)",
        series,
        Mode::LinesMarkers,
    ))
}

/// Prediction depth: for each set of tokens (a class, a model), the share whose lens top-1 has
/// settled on the model's own token by each block, with the mean depth in the legend.
///
/// # Errors
/// When no summary is given.
pub fn prediction_depth_curves(summaries: &[DepthSummary]) -> Result<Chart> {
    let series: Vec<(String, Vec<f64>, Vec<f64>)> = summaries
        .iter()
        .map(|s| {
            let share = s.settled_share();
            (
                format!(
                    "{} (mean depth {:.1} ± {:.1}, n = {})",
                    s.label, s.mean, s.std, s.n
                ),
                (1..=share.len()).map(|j| j as f64).collect(),
                share,
            )
        })
        .collect();
    xy_lines(
        "Prediction depth: share of tokens whose lens top-1 is the model's own from this block on",
        "block",
        "share of tokens settled",
        series,
    )
}

/// A lens's fit on a run's own tokens ([`LensFit`]): mean KL(final ‖ lens) and the calibration
/// gap per block, each ± its 95 % half-width over prompts.
pub fn lens_fit_chart(fit: &LensFit) -> Result<Chart> {
    let l = fit.mean_kl.len();
    let zeros = || vec![0.0; l];
    let bands = [
        Band {
            name: "KL(final ‖ lens)".into(),
            mean: fit.mean_kl.clone(),
            std: fit.kl_ci95.clone().unwrap_or_else(zeros),
            n: fit.n_prompts,
        },
        Band {
            name: "calibration gap H(lens) − H(final) − KL".into(),
            mean: fit.calibration_gap.clone(),
            std: fit.gap_ci95.clone().unwrap_or_else(zeros),
            n: fit.n_prompts,
        },
    ];
    bands_chart(
        &format!(
            "Lens fit on the run's own tokens (± 95 % CI over {} prompts, {} tokens; gap 0 = calibrated, < 0 = over-confident)",
            fit.n_prompts, fit.n_tokens
        ),
        &bands,
        "nats",
        "block",
        |n| (1..=n).map(|j| j as f64).collect(),
    )
}

/// Mean profile ± one standard deviation per group of profiles (rows: samples, columns: blocks),
/// as the paper's Figure 10.
pub fn mean_profile_bands(groups: &[(String, Array2<f64>)], y_label: &str) -> Result<Chart> {
    if groups.is_empty() {
        return Err(Error::Data("no groups to plot".into()));
    }
    let mut bands = Vec::new();
    for (name, m) in groups {
        if m.nrows() == 0 {
            return Err(Error::Data(format!("group {name:?} has no profiles")));
        }
        bands.push(Band {
            name: name.clone(),
            mean: m.mean_axis(NdAxis(0)).unwrap_or_default().to_vec(),
            std: m.std_axis(NdAxis(0), 0.0).to_vec(),
            n: m.nrows(),
        });
    }
    profile_bands(&bands, y_label)
}

/// A precomputed mean profile ± std over `n` profiles (x = block 1..L).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Band {
    pub name: String,
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub n: usize,
}

/// Mean ± std bands from precomputed statistics (see [`mean_profile_bands`]).
pub fn profile_bands(groups: &[Band], y_label: &str) -> Result<Chart> {
    bands_chart(
        "Mean entropy profile ± std",
        groups,
        y_label,
        "block",
        |n| (1..=n).map(|j| j as f64).collect(),
    )
}

/// Mean ± std bands of profiles on the relative-depth axis (0 = first block, 1 = last), for
/// models of different depths (the paper's Figure 8).
pub fn depth_profile_bands(groups: &[Band], y_label: &str) -> Result<Chart> {
    bands_chart(
        "Mean entropy profile ± std",
        groups,
        y_label,
        "relative depth",
        |n| (0..n).map(|i| i as f64 / (n.max(2) - 1) as f64).collect(),
    )
}

fn bands_chart(
    title: &str,
    groups: &[Band],
    y_label: &str,
    x_label: &str,
    x_axis: impl Fn(usize) -> Vec<f64>,
) -> Result<Chart> {
    if groups.is_empty() {
        return Err(Error::Data("no groups to plot".into()));
    }
    let mut lines = Vec::new();
    for b in groups {
        if b.mean.len() != b.std.len() || b.mean.is_empty() {
            return Err(Error::Data(format!(
                "group {:?} has {} means and {} deviations",
                b.name,
                b.mean.len(),
                b.std.len()
            )));
        }
        lines.push(IntervalLine {
            name: b.name.clone(),
            label: format!("{} (n = {})", b.name, b.n),
            xs: x_axis(b.mean.len()),
            lo: b.mean.iter().zip(&b.std).map(|(a, s)| a - s).collect(),
            hi: b.mean.iter().zip(&b.std).map(|(a, s)| a + s).collect(),
            mean: b.mean.clone(),
        });
    }
    interval_lines(title, x_label, y_label, &lines)
}

/// A line with a shaded interval around it (a confidence interval, or mean ± std).
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalLine {
    pub name: String,
    /// The legend entry (e.g. the name and its count).
    pub label: String,
    pub xs: Vec<f64>,
    pub mean: Vec<f64>,
    pub lo: Vec<f64>,
    pub hi: Vec<f64>,
}

/// Lines with shaded intervals (e.g. held-out KL ± its bootstrap interval, one line per lens).
pub fn interval_lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[IntervalLine],
) -> Result<Chart> {
    if lines.is_empty() {
        return Err(Error::Data("no lines to plot".into()));
    }
    let mut plot = Plot::new();
    let (mut series, mut bands) = (Vec::new(), Vec::new());
    for (i, b) in lines.iter().enumerate() {
        let n = b.mean.len();
        if n == 0 || b.xs.len() != n || b.lo.len() != n || b.hi.len() != n {
            return Err(Error::Data(format!(
                "line {:?} has {} x values, {} means and {}/{} interval ends",
                b.name,
                b.xs.len(),
                n,
                b.lo.len(),
                b.hi.len()
            )));
        }
        let name = &b.name;
        let color = PALETTE[i % PALETTE.len()];
        plot.add_trace(
            Scatter::new(b.xs.clone(), b.hi.clone())
                .mode(Mode::Lines)
                .line(plotly::common::Line::new().width(0.0).color(color))
                .show_legend(false)
                .legend_group(name)
                .name(format!("{name} (upper)")),
        );
        plot.add_trace(
            Scatter::new(b.xs.clone(), b.lo.clone())
                .mode(Mode::Lines)
                .line(plotly::common::Line::new().width(0.0).color(color))
                .fill(plotly::common::Fill::ToNextY)
                .fill_color(format!("{color}33"))
                .show_legend(false)
                .legend_group(name)
                .name(format!("{name} (lower)")),
        );
        plot.add_trace(
            Scatter::new(b.xs.clone(), b.mean.clone())
                .mode(Mode::Lines)
                .line(plotly::common::Line::new().color(color).width(2.0))
                .legend_group(name)
                .name(b.label.clone()),
        );
        series.push((name.clone(), b.xs.clone(), b.mean.clone()));
        bands.push(Some((b.lo.clone(), b.hi.clone())));
    }
    let title = title.to_string();
    plot.set_layout(layout(&title, x_label, y_label, 420));
    Ok(Chart::new(
        plot,
        title,
        420,
        Sketch::Lines {
            x_label: x_label.into(),
            y_label: y_label.into(),
            series,
            bands,
            log_y: false,
        },
    ))
}

const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// ΔH per block for one measured position (index into `profile.positions`), green where the
/// top-p candidate count grows (expansion), red where it shrinks (pruning), each bar labelled with
/// the count: the paper's Figure 7.
pub fn delta_bars(profile: &EntropyProfile, position_index: usize) -> Result<Chart> {
    let p = position_at(profile, position_index)?;
    let h = ndarray::Array2::from_shape_vec((1, p.shannon.len()), p.shannon.clone())
        .map_err(|e| Error::Data(e.to_string()))?;
    let dh = delta(h.view()).row(0).to_vec();
    let counts = &p.top_p_count;
    let x: Vec<String> = (2..=p.shannon.len()).map(|j| j.to_string()).collect();
    let colors: Vec<&'static str> = (1..counts.len())
        .map(|j| match counts[j].cmp(&counts[j - 1]) {
            std::cmp::Ordering::Greater => GREEN,
            std::cmp::Ordering::Less => RED,
            std::cmp::Ordering::Equal => GREY,
        })
        .collect();
    let labels: Vec<String> = counts[1..].iter().map(|c| c.to_string()).collect();
    let hover: Vec<String> = (1..counts.len())
        .map(|j| {
            format!(
                "block {}: ΔH = {:+.3} nats, top-p count {} → {}",
                j + 1,
                dh[j - 1],
                counts[j - 1],
                counts[j]
            )
        })
        .collect();
    let bar = Bar::new(x.clone(), dh.clone())
        .marker(Marker::new().color_array(colors.iter().map(|c| c.to_string()).collect()))
        .text_array(labels.clone())
        .hover_text_array(hover)
        .name("ΔH");
    let mut plot = Plot::new();
    plot.add_trace(bar);
    let next = next_token_label(profile, p);
    let title = format!(
        "ΔH by block at position {} (→ {next}); labels: top-p count (p = {})",
        p.position, profile.top_p
    );
    plot.set_layout(layout(&title, "block", "ΔH (nats)", 420));
    Ok(Chart::new(
        plot,
        title,
        420,
        Sketch::Bars {
            x,
            y: dh,
            colors,
            labels,
        },
    ))
}

/// The token a position finally chose (its `target` trace, measured with
/// [`crate::lens::TargetToken::Next`]), followed through the blocks: its rank (1 = the lens' most
/// likely token) and its probability at every block, both on a log axis.
///
/// # Errors
/// When the position index is out of range or the position carries no target trace.
pub fn target_trace(profile: &EntropyProfile, position_index: usize) -> Result<Chart> {
    let p = position_at(profile, position_index)?;
    let t = p.target.as_ref().ok_or_else(|| {
        Error::Data(format!(
            "position {} has no target trace; profile with the target `next` (--target next)",
            p.position
        ))
    })?;
    let x = point_axis(profile.read_point, profile.n_blocks);
    let rank: Vec<f64> = t.rank.iter().map(|&r| f64::from(r.max(1))).collect();
    // A probability that underflowed to 0 still needs a place on the log axis.
    let prob: Vec<f64> = t.logprob.iter().map(|&l| l.exp().max(1e-30)).collect();
    let title = format!(
        "position {} → {}: rank and probability of the chosen token by block",
        p.position,
        next_token_label(profile, p)
    );
    xy_lines_log_y(
        &title,
        "block",
        "rank (1 = top) · probability",
        vec![
            ("rank".into(), x.clone(), rank),
            ("probability".into(), x, prob),
        ],
    )
}

/// Several models' mean profiles on a relative-depth axis [0, 1] (the paper's Figure 4).
pub fn depth_normalized(models: &[(String, Vec<f64>)], points: usize) -> Result<Chart> {
    if models.is_empty() {
        return Err(Error::Data("no models to plot".into()));
    }
    let xs: Vec<f64> = (0..points)
        .map(|i| i as f64 / (points.max(2) - 1) as f64)
        .collect();
    let mut series = Vec::new();
    for (name, profile) in models {
        let m = ndarray::Array2::from_shape_vec((1, profile.len()), profile.clone())
            .map_err(|e| Error::Data(e.to_string()))?;
        let ys = depth_normalize(m.view(), points)?.row(0).to_vec();
        series.push((name.clone(), xs.clone(), ys));
    }
    Ok(line_chart(
        "Mean entropy profiles on relative depth",
        "relative depth",
        "entropy (nats)",
        series,
        Mode::Lines,
    ))
}

/// A 2-D projection coloured by label, point size by `sizes` (scaled to 6..24 px) — the paper's
/// Figures 3 and 5.
pub fn projection_scatter(
    proj: &Projection,
    labels: &[String],
    sizes: Option<&[f64]>,
) -> Result<Chart> {
    let n = proj.coords.nrows();
    if labels.len() != n {
        return Err(Error::Data(format!(
            "{n} points but {} labels",
            labels.len()
        )));
    }
    if proj.coords.ncols() < 2 {
        return Err(Error::Data("a scatter needs two components".into()));
    }
    if let Some(s) = sizes {
        if s.len() != n {
            return Err(Error::Data(format!("{n} points but {} sizes", s.len())));
        }
    }
    let px: Vec<f64> = match sizes {
        Some(s) => {
            let (lo, hi) = s
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                    (a.min(v), b.max(v))
                });
            s.iter()
                .map(|&v| {
                    if hi > lo {
                        6.0 + 18.0 * (v - lo) / (hi - lo)
                    } else {
                        10.0
                    }
                })
                .collect()
        }
        None => vec![8.0; n],
    };
    let mut groups: Vec<String> = labels.to_vec();
    groups.sort();
    groups.dedup();
    let mut plot = Plot::new();
    let mut sketch = Vec::new();
    for g in &groups {
        let idx: Vec<usize> = (0..n).filter(|&i| &labels[i] == g).collect();
        let xs: Vec<f64> = idx.iter().map(|&i| proj.coords[[i, 0]]).collect();
        let ys: Vec<f64> = idx.iter().map(|&i| proj.coords[[i, 1]]).collect();
        let ss: Vec<usize> = idx.iter().map(|&i| px[i].round() as usize).collect();
        plot.add_trace(
            Scatter::new(xs.clone(), ys.clone())
                .mode(Mode::Markers)
                .name(g)
                .marker(Marker::new().size_array(ss).opacity(0.75)),
        );
        sketch.push((
            g.clone(),
            idx.iter()
                .map(|&i| (proj.coords[[i, 0]], proj.coords[[i, 1]], px[i] / 2.0))
                .collect(),
        ));
    }
    let method = proj.method.to_uppercase();
    let title = match (&proj.explained_variance_ratio, proj.kl_divergence) {
        (Some(r), _) if r.len() >= 2 => format!(
            "{method} of entropy profiles (explained variance {:.1}% + {:.1}%)",
            100.0 * r[0],
            100.0 * r[1]
        ),
        (_, Some(kl)) => format!("{method} of entropy profiles (KL {kl:.3})"),
        _ => format!("{method} of entropy profiles"),
    };
    plot.set_layout(layout(
        &title,
        &format!("{method} 1"),
        &format!("{method} 2"),
        480,
    ));
    Ok(Chart::new(
        plot,
        title,
        480,
        Sketch::Scatter { groups: sketch },
    ))
}

/// A mean ΔH per block 1..=L (block 1 against the embedding output), green where the entropy
/// rises (expansion), red where it falls (pruning): what the `skip` experiment ranks blocks by.
pub fn delta_mean_bars(mean_delta: &[f64], title: &str) -> Result<Chart> {
    if mean_delta.is_empty() {
        return Err(Error::Data("no blocks to plot".into()));
    }
    let x: Vec<String> = (1..=mean_delta.len()).map(|b| b.to_string()).collect();
    let colors: Vec<&'static str> = mean_delta
        .iter()
        .map(|&d| {
            if d > 0.0 {
                GREEN
            } else if d < 0.0 {
                RED
            } else {
                GREY
            }
        })
        .collect();
    let labels = vec![String::new(); mean_delta.len()];
    let bar = Bar::new(x.clone(), mean_delta.to_vec())
        .marker(Marker::new().color_array(colors.iter().map(|c| c.to_string()).collect()))
        .name("mean ΔH");
    let mut plot = Plot::new();
    plot.add_trace(bar);
    plot.set_layout(layout(title, "block", "ΔH (nats)", 420));
    Ok(Chart::new(
        plot,
        title.to_string(),
        420,
        Sketch::Bars {
            x,
            y: mean_delta.to_vec(),
            colors,
            labels,
        },
    ))
}

/// Accuracy against the fraction of blocks skipped, one curve per strategy (the paper's Figure 6).
pub fn skip_curves(fractions: &[f64], curves: &[(String, Vec<f64>)]) -> Result<Chart> {
    let mut series = Vec::new();
    for (name, acc) in curves {
        if acc.len() != fractions.len() {
            return Err(Error::Data(format!(
                "curve {name:?} has {} points for {} fractions",
                acc.len(),
                fractions.len()
            )));
        }
        series.push((name.clone(), fractions.to_vec(), acc.clone()));
    }
    Ok(line_chart(
        "Accuracy as blocks are skipped",
        "fraction of blocks skipped",
        "accuracy",
        series,
        Mode::LinesMarkers,
    ))
}

/// Cosine similarity between samples' profiles, one matrix per Rényi order (the paper's Figure 9);
/// each panel's title gives the matrix's standard deviation σ. `features[i]` holds the samples'
/// profiles (rows) for `alphas[i]`. Returns the chart and the σ values.
pub fn renyi_similarity(alphas: &[f64], features: &[Array2<f64>]) -> Result<(Chart, Vec<f64>)> {
    if alphas.len() != features.len() || alphas.is_empty() {
        return Err(Error::Data(format!(
            "{} orders but {} feature matrices",
            alphas.len(),
            features.len()
        )));
    }
    let sims: Vec<Array2<f64>> = features
        .iter()
        .map(|x| cosine_similarity(x.view()))
        .collect();
    let sigmas = sims.iter().map(|m| matrix_std(m.view())).collect();
    Ok((similarity_panels(alphas, &sims)?, sigmas))
}

/// Population standard deviation of a matrix's entries (the σ of the paper's Figure 9).
pub fn matrix_std(m: ArrayView2<f64>) -> f64 {
    let n = m.len().max(1) as f64;
    let mean = m.iter().sum::<f64>() / n;
    (m.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt()
}

/// Heatmaps of precomputed similarity matrices, one panel per Rényi order, titled with σ.
pub fn similarity_panels(alphas: &[f64], sims: &[Array2<f64>]) -> Result<Chart> {
    if alphas.len() != sims.len() || alphas.is_empty() {
        return Err(Error::Data(format!(
            "{} orders but {} similarity matrices",
            alphas.len(),
            sims.len()
        )));
    }
    if alphas.len() > 8 {
        return Err(Error::invalid("at most 8 Rényi orders fit in one figure"));
    }
    let mut plot = Plot::new();
    let mut parts = Vec::new();
    let mut layout = Layout::new().height(380).grid(
        LayoutGrid::new()
            .rows(1)
            .columns(alphas.len())
            .pattern(GridPattern::Independent),
    );
    let mut annotations = Vec::new();
    for (i, (&a, sim)) in alphas.iter().zip(sims).enumerate() {
        let n = sim.nrows();
        if sim.ncols() != n {
            return Err(Error::Data(format!(
                "similarity matrix {i} is {n} × {}, not square",
                sim.ncols()
            )));
        }
        let sigma = matrix_std(sim.view());
        let labels: Vec<String> = (0..n).map(|j| j.to_string()).collect();
        let z: Vec<Vec<f64>> = sim.rows().into_iter().map(|r| r.to_vec()).collect();
        let mut t = CellHeatmap::new(labels.clone(), labels.clone(), z.clone());
        t.hover_text = Some(
            (0..n)
                .map(|r| {
                    (0..n)
                        .map(|c| format!("samples {r}, {c}: cos = {:.4}", z[r][c]))
                        .collect()
                })
                .collect(),
        );
        t.zmin = Some(-1.0);
        t.zmax = Some(1.0);
        t.show_scale = i + 1 == alphas.len();
        let suffix = if i == 0 {
            String::new()
        } else {
            (i + 1).to_string()
        };
        t.x_axis = Some(format!("x{suffix}"));
        t.y_axis = Some(format!("y{suffix}"));
        plot.add_trace(Box::new(t));
        let panel = format!("α = {}, σ = {:.3}", alpha_key(a), sigma);
        annotations.push(
            plotly::layout::Annotation::new()
                .text(&panel)
                .x_ref(format!("x{suffix} domain"))
                .y_ref(format!("y{suffix} domain"))
                .x(0.5)
                .y(1.08)
                .show_arrow(false),
        );
        parts.push((
            panel,
            Sketch::Heatmap {
                x: labels.clone(),
                y: labels,
                z,
            },
        ));
    }
    layout = layout
        .title(Title::with_text(
            "Cosine similarity of profiles across Rényi orders",
        ))
        .annotations(annotations);
    plot.set_layout(layout);
    Ok(Chart::new(
        plot,
        "Cosine similarity of profiles across Rényi orders",
        380,
        Sketch::Row(parts),
    ))
}

/// Cosine similarity between the rows of `x` (0 where a row is all zeros).
pub fn cosine_similarity(x: ArrayView2<f64>) -> Array2<f64> {
    let norms: Vec<f64> = x.rows().into_iter().map(|r| r.dot(&r).sqrt()).collect();
    let g = x.dot(&x.t());
    Array2::from_shape_fn(g.dim(), |(i, j)| {
        let d = norms[i] * norms[j];
        if d > 0.0 {
            g[[i, j]] / d
        } else {
            0.0
        }
    })
}

/// Per-block table of one measured position: entropy, ΔH, top-p count and the lens's top token.
pub fn profile_table(
    profile: &EntropyProfile,
    position_index: usize,
    tokenizer: Option<&TextTokenizer>,
) -> Result<Table> {
    let p = position_at(profile, position_index)?;
    let next = next_token_label(profile, p);
    let mut alphas: Vec<&String> = p.renyi.keys().collect();
    alphas.sort();
    let mut header = vec![
        "block".to_string(),
        "H (nats)".into(),
        "ΔH".into(),
        "top-p count".into(),
        "top token".into(),
    ];
    header.extend(alphas.iter().map(|a| format!("H_{a}")));
    let refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(
        format!(
            "{}: position {} (→ {next}), lens by block",
            profile.model, p.position
        ),
        &refs,
    );
    for j in 0..p.shannon.len() {
        let dh = if j == 0 {
            String::new()
        } else {
            format!("{:+.3}", p.shannon[j] - p.shannon[j - 1])
        };
        let top = p
            .top_k
            .get(j)
            .and_then(|k| k.first())
            .map(|&(id, pr)| format!("{} ({:.2})", decode(tokenizer, id), pr))
            .unwrap_or_default();
        let mut row = vec![
            (j + 1).to_string(),
            format!("{:.3}", p.shannon[j]),
            dh,
            p.top_p_count[j].to_string(),
            top,
        ];
        row.extend(alphas.iter().map(|a| format!("{:.3}", p.renyi[*a][j])));
        t.row(row);
    }
    Ok(t)
}
