//! A small table that renders as aligned text in a terminal and as HTML in a notebook; every
//! result type of the crate shows itself through it.

/// A titled table of strings with optional notes under it.
#[derive(Clone, Debug, Default)]
pub struct Table {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    notes: Vec<String>,
}

/// A fraction as a percentage with two decimals (0.9549 → "95.49").
pub fn fmt_pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.2}", 100.0 * x)
    } else {
        "n/a".into()
    }
}

/// A number with `digits` decimals, "n/a" when missing or not finite.
pub fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "n/a".into(),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Table {
    pub fn new(title: impl Into<String>, header: &[&str]) -> Self {
        Self {
            title: title.into(),
            header: header.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    pub fn row(&mut self, cells: Vec<String>) -> &mut Self {
        self.rows.push(cells);
        self
    }

    pub fn note(&mut self, note: impl Into<String>) -> &mut Self {
        self.notes.push(note.into());
        self
    }

    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    pub fn title(&self) -> &str {
        &self.title
    }

    pub fn header(&self) -> &[String] {
        &self.header
    }

    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Self-contained HTML (a `<table>` with a caption and notes), styled inline.
    pub fn to_html(&self) -> String {
        let mut h = String::from(
            "<div class=\"entropy-lens-table\"><table style=\"border-collapse:collapse;font-family:sans-serif;font-size:13px\">",
        );
        if !self.title.is_empty() {
            h.push_str(&format!(
                "<caption style=\"text-align:left;font-weight:bold;padding:4px 0\">{}</caption>",
                escape(&self.title)
            ));
        }
        let cell = "style=\"border-bottom:1px solid #ccc;padding:3px 10px;text-align:right\"";
        h.push_str("<thead><tr>");
        for c in &self.header {
            h.push_str(&format!("<th {cell}>{}</th>", escape(c)));
        }
        h.push_str("</tr></thead><tbody>");
        for r in &self.rows {
            h.push_str("<tr>");
            for c in r {
                h.push_str(&format!("<td {cell}>{}</td>", escape(c)));
            }
            h.push_str("</tr>");
        }
        h.push_str("</tbody></table>");
        for n in &self.notes {
            h.push_str(&format!(
                "<div style=\"font-family:sans-serif;font-size:12px;color:#555\">{}</div>",
                escape(n)
            ));
        }
        h.push_str("</div>");
        h
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain(std::iter::once(self.header.len()))
            .max()
            .unwrap_or(0);
        let width = |j: usize| {
            std::iter::once(&self.header)
                .chain(&self.rows)
                .filter_map(|r| r.get(j))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..cols).map(width).collect();
        if !self.title.is_empty() {
            writeln!(f, "{}", self.title)?;
        }
        let line = |f: &mut std::fmt::Formatter<'_>, r: &[String]| -> std::fmt::Result {
            let cells: Vec<String> = (0..cols)
                .map(|j| {
                    let c = r.get(j).map(String::as_str).unwrap_or("");
                    let pad = widths[j].saturating_sub(c.chars().count());
                    if j == 0 {
                        format!("{c}{}", " ".repeat(pad))
                    } else {
                        format!("{}{c}", " ".repeat(pad))
                    }
                })
                .collect();
            writeln!(f, "  {}", cells.join("  "))
        };
        line(f, &self.header)?;
        writeln!(
            f,
            "  {}",
            widths
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("  ")
        )?;
        for r in &self.rows {
            line(f, r)?;
        }
        for n in &self.notes {
            writeln!(f, "  {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_text_and_escaped_html() {
        let mut t = Table::new("Scores", &["model", "AUC"]);
        t.row(vec!["a<b".into(), "95.00".into()]);
        t.note("p < 0.01");
        let text = t.to_string();
        assert!(text.contains("Scores") && text.contains("a<b") && text.contains("95.00"));
        let html = t.to_html();
        assert!(
            html.contains("<td style=") && html.contains("a&lt;b") && html.contains("p &lt; 0.01")
        );
        assert_eq!(fmt_pct(0.95494), "95.49");
        assert_eq!(fmt_opt(None, 3), "n/a");
    }
}
