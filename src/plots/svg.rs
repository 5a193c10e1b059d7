//! Static SVG sketches of charts: the fallback where plotly.js cannot run, and an image to save.

use std::fmt::Write;

/// Points of one scatter group: (x, y, radius in px).
pub(crate) type Points = Vec<(f64, f64, f64)>;

/// The data of a chart, enough to draw it statically.
#[derive(Clone, Debug)]
pub(crate) enum Sketch {
    /// Rows of `z` go bottom (first) to top, as the interactive heatmap.
    Heatmap {
        x: Vec<String>,
        y: Vec<String>,
        z: Vec<Vec<f64>>,
    },
    /// Named series of (x, y) points, optionally with a (low, high) band each; `log_y` draws
    /// log₁₀ y (every y positive).
    Lines {
        x_label: String,
        y_label: String,
        series: Vec<(String, Vec<f64>, Vec<f64>)>,
        bands: Vec<Option<(Vec<f64>, Vec<f64>)>>,
        log_y: bool,
    },
    Bars {
        x: Vec<String>,
        y: Vec<f64>,
        colors: Vec<&'static str>,
        labels: Vec<String>,
    },
    Scatter {
        groups: Vec<(String, Points)>,
    },
    /// Several sketches side by side with their titles.
    Row(Vec<(String, Sketch)>),
}

const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Viridis, sampled at 9 points and linearly interpolated.
fn viridis(t: f64) -> String {
    const C: [(f64, f64, f64); 9] = [
        (68.0, 1.0, 84.0),
        (71.0, 44.0, 122.0),
        (59.0, 81.0, 139.0),
        (44.0, 113.0, 142.0),
        (33.0, 144.0, 141.0),
        (39.0, 173.0, 129.0),
        (92.0, 200.0, 99.0),
        (170.0, 220.0, 50.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    } * 8.0;
    let i = (t.floor() as usize).min(7);
    let f = t - i as f64;
    let (a, b) = (C[i], C[i + 1]);
    format!(
        "rgb({:.0},{:.0},{:.0})",
        a.0 + (b.0 - a.0) * f,
        a.1 + (b.1 - a.1) * f,
        a.2 + (b.2 - a.2) * f
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo, hi)
    }
}

struct Frame {
    x0: f64,
    y0: f64,
    w: f64,
    h: f64,
}

impl Frame {
    fn px(&self, t: f64) -> f64 {
        self.x0 + t * self.w
    }
    fn py(&self, t: f64) -> f64 {
        self.y0 + self.h - t * self.h
    }
}

impl Sketch {
    /// A complete `<svg>` element.
    pub fn render(&self, title: &str, width: usize, height: usize) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"entropy-lens-sketch\" width=\"{width}\" height=\"{height}\" \
             viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"11\">\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\
             <text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">{}</text>",
            width / 2,
            esc(title)
        );
        let frame = Frame {
            x0: 60.0,
            y0: 32.0,
            w: width as f64 - 200.0,
            h: height as f64 - 80.0,
        };
        self.draw(&mut s, &frame);
        s.push_str("</svg>");
        s
    }

    fn draw(&self, s: &mut String, f: &Frame) {
        match self {
            Sketch::Heatmap { x, y, z } => {
                let (lo, hi, cw, ch) = cells(s, f, z);
                let (rows, cols) = (z.len().max(1), z.first().map(Vec::len).unwrap_or(1).max(1));
                let step = (cols / 24).max(1);
                for (c, label) in x.iter().enumerate().step_by(step) {
                    let _ = write!(
                        s,
                        "<text x=\"{:.1}\" y=\"{:.1}\" transform=\"rotate(45 {:.1} {:.1})\">{}</text>",
                        f.x0 + (c as f64 + 0.5) * cw,
                        f.y0 + f.h + 12.0,
                        f.x0 + (c as f64 + 0.5) * cw,
                        f.y0 + f.h + 12.0,
                        esc(&label.chars().take(12).collect::<String>())
                    );
                }
                let step = (rows / 12).max(1);
                for (r, label) in y.iter().enumerate().step_by(step) {
                    let _ = write!(
                        s,
                        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                        f.x0 - 4.0,
                        f.y0 + f.h - (r as f64 + 0.5) * ch + 4.0,
                        esc(label)
                    );
                }
                // Colour bar.
                for i in 0..50 {
                    let t = i as f64 / 49.0;
                    let _ = write!(
                        s,
                        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"14\" height=\"{:.2}\" fill=\"{}\"/>",
                        f.x0 + f.w + 20.0,
                        f.py(t) - f.h / 50.0,
                        f.h / 50.0 + 0.5,
                        viridis(t)
                    );
                }
                let _ = write!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\">{hi:.2}</text><text x=\"{:.1}\" y=\"{:.1}\">{lo:.2}</text>",
                    f.x0 + f.w + 38.0,
                    f.y0 + 8.0,
                    f.x0 + f.w + 38.0,
                    f.y0 + f.h
                );
            }
            Sketch::Lines {
                x_label,
                y_label,
                series,
                bands,
                log_y,
            } => {
                // On a log axis positions are log₁₀ y; the axis ends are labelled with y itself.
                let ty = |v: f64| if *log_y { v.log10() } else { v };
                let (xl, xh) = range(series.iter().flat_map(|(_, x, _)| x.iter().cloned()));
                let (yl, yh) = range(
                    series
                        .iter()
                        .flat_map(|(_, _, y)| y.iter().cloned())
                        .chain(
                            bands
                                .iter()
                                .flatten()
                                .flat_map(|(l, h)| l.iter().chain(h).cloned()),
                        )
                        .map(ty),
                );
                let ends = if *log_y {
                    (10f64.powf(yl), 10f64.powf(yh))
                } else {
                    (yl, yh)
                };
                axes(s, f, (xl, xh), ends, x_label, y_label);
                let pt = |a: &f64, b: &f64| {
                    format!(
                        "{:.1},{:.1}",
                        f.px((a - xl) / (xh - xl)),
                        f.py((ty(*b) - yl) / (yh - yl))
                    )
                };
                for (i, (name, x, y)) in series.iter().enumerate() {
                    let color = PALETTE[i % PALETTE.len()];
                    if let Some(Some((lo, hi))) = bands.get(i) {
                        let mut pts: Vec<String> =
                            x.iter().zip(hi).map(|(a, b)| pt(a, b)).collect();
                        pts.extend(x.iter().zip(lo).rev().map(|(a, b)| pt(a, b)));
                        let _ = write!(
                            s,
                            "<polygon points=\"{}\" fill=\"{color}\" fill-opacity=\"0.2\"/>",
                            pts.join(" ")
                        );
                    }
                    let pts: Vec<String> = x.iter().zip(y).map(|(a, b)| pt(a, b)).collect();
                    let _ = write!(
                        s,
                        "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.6\"/>",
                        pts.join(" ")
                    );
                    legend(s, f, i, name, color);
                }
            }
            Sketch::Bars {
                x,
                y,
                colors,
                labels,
            } => {
                let (yl, yh) = range(y.iter().cloned().chain(std::iter::once(0.0)));
                axes(s, f, (0.0, x.len() as f64), (yl, yh), "", "");
                let bw = f.w / x.len().max(1) as f64;
                let zero = f.py((0.0 - yl) / (yh - yl));
                for (i, v) in y.iter().enumerate() {
                    let top = f.py((v - yl) / (yh - yl));
                    let _ = write!(
                        s,
                        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
                        f.x0 + i as f64 * bw + 1.0,
                        top.min(zero),
                        (bw - 2.0).max(1.0),
                        (top - zero).abs(),
                        colors.get(i).copied().unwrap_or("#888")
                    );
                    if let Some(l) = labels.get(i) {
                        let _ = write!(
                            s,
                            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"9\">{}</text>",
                            f.x0 + (i as f64 + 0.5) * bw,
                            top.min(zero) - 2.0,
                            esc(l)
                        );
                    }
                }
                let step = (x.len() / 20).max(1);
                for (i, l) in x.iter().enumerate().step_by(step) {
                    let _ = write!(
                        s,
                        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                        f.x0 + (i as f64 + 0.5) * bw,
                        f.y0 + f.h + 14.0,
                        esc(l)
                    );
                }
            }
            Sketch::Scatter { groups } => {
                let all = || groups.iter().flat_map(|(_, p)| p.iter());
                let (xl, xh) = range(all().map(|p| p.0));
                let (yl, yh) = range(all().map(|p| p.1));
                axes(s, f, (xl, xh), (yl, yh), "", "");
                for (i, (name, pts)) in groups.iter().enumerate() {
                    let color = PALETTE[i % PALETTE.len()];
                    for (x, y, r) in pts {
                        let _ = write!(
                            s,
                            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{:.1}\" fill=\"{color}\" fill-opacity=\"0.7\"/>",
                            f.px((x - xl) / (xh - xl)),
                            f.py((y - yl) / (yh - yl)),
                            r.clamp(1.5, 12.0)
                        );
                    }
                    legend(s, f, i, name, color);
                }
            }
            Sketch::Row(parts) => {
                let n = parts.len().max(1) as f64;
                let w = (f.w + 120.0) / n;
                for (i, (title, part)) in parts.iter().enumerate() {
                    let sub = Frame {
                        x0: f.x0 + i as f64 * w,
                        y0: f.y0 + 14.0,
                        w: w - 30.0,
                        h: f.h - 14.0,
                    };
                    let _ = write!(
                        s,
                        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                        sub.x0 + sub.w / 2.0,
                        f.y0 + 8.0,
                        esc(title)
                    );
                    match part {
                        Sketch::Heatmap { z, .. } => {
                            cells(s, &sub, z);
                        }
                        other => other.draw(s, &sub),
                    }
                }
            }
        }
    }
}

/// Draws `z` (rows bottom to top) as coloured cells filling `f`; returns (min, max, cell w, cell h).
fn cells(s: &mut String, f: &Frame, z: &[Vec<f64>]) -> (f64, f64, f64, f64) {
    let (lo, hi) = range(z.iter().flatten().cloned());
    let rows = z.len().max(1);
    let cols = z.first().map(Vec::len).unwrap_or(1).max(1);
    let (cw, ch) = (f.w / cols as f64, f.h / rows as f64);
    for (r, row) in z.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\"/>",
                f.x0 + c as f64 * cw,
                f.y0 + f.h - (r + 1) as f64 * ch,
                cw + 0.3,
                ch + 0.3,
                viridis((v - lo) / (hi - lo))
            );
        }
    }
    (lo, hi, cw, ch)
}

/// The frame, the ends of both axes (labelled with `x` and `y`) and the axis titles.
fn axes(s: &mut String, f: &Frame, x: (f64, f64), y: (f64, f64), x_label: &str, y_label: &str) {
    let _ = write!(
        s,
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#999\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{:.3}</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{:.3}</text>",
        f.x0,
        f.y0,
        f.w,
        f.h,
        f.x0 - 4.0,
        f.y0 + 10.0,
        y.1,
        f.x0 - 4.0,
        f.y0 + f.h,
        y.0
    );
    if !x_label.is_empty() {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"start\">{:.3}</text>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{:.3}</text>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            f.x0,
            f.y0 + f.h + 14.0,
            x.0,
            f.x0 + f.w,
            f.y0 + f.h + 14.0,
            x.1,
            f.x0 + f.w / 2.0,
            f.y0 + f.h + 30.0,
            esc(x_label)
        );
    }
    if !y_label.is_empty() {
        let _ = write!(
            s,
            "<text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">{}</text>",
            f.y0 + f.h / 2.0,
            f.y0 + f.h / 2.0,
            esc(y_label)
        );
    }
}

fn legend(s: &mut String, f: &Frame, i: usize, name: &str, color: &str) {
    if i >= 16 {
        return;
    }
    let y = f.y0 + 10.0 + i as f64 * 15.0;
    let _ = write!(
        s,
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
        f.x0 + f.w + 12.0,
        y - 8.0,
        f.x0 + f.w + 26.0,
        y + 1.0,
        esc(&name.chars().take(22).collect::<String>())
    );
}
